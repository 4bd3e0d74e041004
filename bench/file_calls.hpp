// bench/file_calls: what hostagent's durable files cost a benchmark (the operation journal, the
// device records). A benchmark linked with hostagent_bench_file_calls gets -Wl,--wrap for fsync,
// open, rename and unlink, so each such call of hostagent's static libraries goes through the
// counters here first: the share of an operation spent making files durable is measured, not guessed.
#pragma once

#include <cstdint>

namespace hostagent::bench {

struct FileCalls {
  int64_t fsyncs = 0;
  int64_t fsync_ns = 0;
  int64_t creates = 0;  // open(2) with O_CREAT: the temporary file of each atomic replace
  int64_t renames = 0;
  int64_t unlinks = 0;
  int64_t file_ops_ns = 0;  // creating opens, renames and unlinks

  FileCalls operator-(const FileCalls& earlier) const {
    return {fsyncs - earlier.fsyncs,   fsync_ns - earlier.fsync_ns, creates - earlier.creates,
            renames - earlier.renames, unlinks - earlier.unlinks,   file_ops_ns - earlier.file_ops_ns};
  }
};

// The totals since the program started, from any thread.
FileCalls file_calls_now();

}  // namespace hostagent::bench
