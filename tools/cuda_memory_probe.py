"""What CUDA hands out on this GPU: cuMemGetInfo's total and free right after a context is made (driver API via
ctypes, nothing else loaded), beside nvidia-smi's total."""
import ctypes, subprocess
cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
dev = ctypes.c_int(); assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
name = ctypes.create_string_buffer(128); cuda.cuDeviceGetName(name, 128, dev)
total_dev = ctypes.c_size_t(); cuda.cuDeviceTotalMem_v2(ctypes.byref(total_dev), dev)
ctx = ctypes.c_void_p(); assert cuda.cuCtxCreate_v2(ctypes.byref(ctx), 0, dev) == 0
free = ctypes.c_size_t(); total = ctypes.c_size_t()
assert cuda.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)) == 0
GiB = 1024 ** 3
print(f"device {name.value.decode()}: cuDeviceTotalMem {total_dev.value} B ({total_dev.value / GiB:.3f} GiB); "
      f"after cuCtxCreate cuMemGetInfo total {total.value / GiB:.3f} GiB, free {free.value / GiB:.3f} GiB, "
      f"used {(total.value - free.value) / GiB:.3f} GiB")
print(subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,memory.reserved,memory.used,driver_version",
                      "--format=csv"], capture_output=True, text=True).stdout)
