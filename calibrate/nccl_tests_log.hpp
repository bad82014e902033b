// Reading the standard output of NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf, reduce_scatter_perf,
// alltoall_perf, sendrecv_perf): its "# Collective test starting:" line (nccl-tests 2.13 and later), its
// "#  Rank  0 Group  0 Pid 1234 on host device  0 [0000:18:00] NVIDIA H100 80GB HBM3" lines (the GPUs and
// their hosts), its column header ("# size count type redop root time algbw busbw #wrong time ...") and its
// result rows, of which the out-of-place time is kept. A log may hold several runs one after the other
// (each begins with its "# nThread" line). Every error is an InputError naming the log and the line.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/op.hpp"
#include "core/units.hpp"

namespace twin {

struct NcclTestsRow {
  int line = 0;
  Bytes size_bytes = 0;    // nccl-tests' "size": the S of twin's collective tables
  double time_us = 0;      // out-of-place
  double algbw_GBps = 0;   // as printed (two decimals): checked, not stored
  double busbw_GBps = 0;
};

struct NcclTestsRank {
  int line = 0;
  int rank = 0;
  std::string host;
  std::string device;  // "NVIDIA H100 80GB HBM3"
};

struct NcclTestsRun {
  std::string file;
  int first_line = 0;
  std::string test;                    // "all_reduce_perf" from the header; empty in older logs
  int test_line = 0;
  OpKind collective = OpKind::all_reduce;
  std::string collective_from;         // "the log", "the file name" or "--collective"
  std::vector<NcclTestsRank> ranks;    // in rank order 0..n-1
  std::vector<NcclTestsRow> rows;      // ascending size, size-0 rows left out
};

// The collective of an nccl-tests binary or collective name: all_reduce(_perf), all_gather, reduce_scatter,
// alltoall, sendrecv (twin's names all_to_all and send also); nullopt for the others.
std::optional<OpKind> nccl_tests_collective(std::string_view name);
// The names nccl_tests_collective accepts, for messages: "all_reduce, all_gather, reduce_scatter, alltoall, sendrecv".
std::string nccl_tests_collective_names();

// Every run in the log `text` read from `file`. The collective of a run is `collective` when given (it must
// agree with the log's header where that names one), else the header's, else the one the file name names
// (all_reduce_perf.log, allgather-8gpu.txt, ...). Checks each row's printed busbw / algbw against nccl-tests'
// factor for that collective and rank count, so a log of another collective is refused, not misread.
std::vector<NcclTestsRun> parse_nccl_tests_log(std::string_view text, const std::string& file,
                                               std::optional<OpKind> collective = std::nullopt);

}  // namespace twin
