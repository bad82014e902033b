#!/usr/bin/env python3
"""How NCCL's grouped point-to-point exchange slows with the number of chunks per peer (issue 40).

twin execute's expert dispatch sends one chunk per (peer, local expert) in one NCCL group
(executor/gpu/moe_block.cpp exchange_rows); Megatron's all-to-all dispatcher sends one chunk per peer
(torch all_to_all_single). This probe times, on every pair of ranks of a torchrun job, the same bytes exchanged
as all_to_all_single and as grouped isend/irecv of C equal chunks to the peer (C = 1 .. 64), and prints one JSON
line per case: {"case", "bytes_per_rank", "chunks_per_peer", "time_us" (median over iterations), "GBps"
(bytes sent to peers / time)}. A reference measurement through PyTorch, not part of twin. On two H200s
(2026-11-30 09:47 UTC, docs/accuracy/2026-11-30-a2a-blocks-2xH200.tar.gz) the grouped case was bound by PyTorch's
host, about 50 us a block at every size, so it says nothing of NCCL's blocks: `twin calibrate` times the exchange
the executor issues instead (gpu/row_exchange.hpp, docs/PROFILES.md "All-to-alls in blocks").

Usage: torchrun --nproc_per_node 2 tests/gpu/a2a_chunks_probe.py [--iterations 20]"""
import argparse
import json
import os

import torch
import torch.distributed as dist


def timed_us(step, iterations):
    """Median over `iterations` of one call of `step`, each between two CUDA events, after three warm-ups."""
    for _ in range(3):
        step()
    times = []
    for _ in range(iterations):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        dist.barrier()
        torch.cuda.synchronize()
        start.record()
        step()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e3)
    times.sort()
    return times[len(times) // 2]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    dist.init_process_group("nccl")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    peer = (rank + 1) % world if world == 2 else None
    for bytes_per_rank in (32 << 20, 64 << 20, 128 << 20, 256 << 20):
        elements = bytes_per_rank // 2
        send = torch.randn(elements, device="cuda", dtype=torch.bfloat16)
        receive = torch.empty_like(send)
        peer_bytes = bytes_per_rank * (world - 1) / world
        t = timed_us(lambda: dist.all_to_all_single(receive, send), args.iterations)
        report(rank, "all_to_all_single", bytes_per_rank, 1, t, peer_bytes)
        if peer is None:
            continue
        half = elements // 2  # what goes to the peer in a two-rank all-to-all
        for chunks in (1, 2, 4, 8, 16, 32, 64):
            size = half // chunks

            def exchange():
                ops = [dist.P2POp(dist.isend, send[c * size:(c + 1) * size], peer) for c in range(chunks)]
                ops += [dist.P2POp(dist.irecv, receive[c * size:(c + 1) * size], peer) for c in range(chunks)]
                for work in dist.batch_isend_irecv(ops):
                    work.wait()

            t = timed_us(exchange, args.iterations)
            report(rank, "grouped_p2p_peer_only", bytes_per_rank, chunks, t, size * chunks * 2)
    dist.destroy_process_group()


def report(rank, case, bytes_per_rank, chunks, time_us, peer_bytes):
    if rank == 0:
        print(json.dumps({"case": case, "bytes_per_rank": bytes_per_rank, "chunks_per_peer": chunks,
                          "time_us": round(time_us, 1), "GBps": round(peer_bytes / time_us / 1e3, 1)}), flush=True)


if __name__ == "__main__":
    main()
