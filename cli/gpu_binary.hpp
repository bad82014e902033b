// `twin` built beside `twin-gpu` (TWIN_GPU_BINARY): the GPU commands (twin execute, GPU calibration) run in
// twin-gpu, the same command line linked with the CUDA libraries, which twin replaces itself with (execv, the
// same arguments and environment), so that twin's other commands do not load those libraries at start.
#pragma once

namespace twin {

// Kept by main() before parsing: the arguments twin-gpu is given.
void remember_command_line(int argc, char** argv);
// Replaces this process with twin-gpu from twin's own folder; returns 1 with an error naming the path when it
// cannot (a build without the CUDA toolkit has no twin-gpu).
int run_gpu_binary();

}  // namespace twin
