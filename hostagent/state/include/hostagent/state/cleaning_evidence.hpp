// hostagent/state/cleaning_evidence: the evidence of each cleaning of a device between tenants (issue
// 19's device lifecycle): one JSON line per cleaning in one append-only file, each line carrying the
// SHA-256 of the line before it (the first, the SHA-256 of nothing). A line changed, removed or
// inserted after it was written breaks the chain there: the reader says where and why, and never
// repairs it. A crash while a line is appended leaves it torn: it was never acknowledged, and is cut
// when the log is opened again.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "hostagent/common/pci_address.hpp"
#include "hostagent/common/result.hpp"

namespace hostagent::state {

// The version of a evidence line's layout, written in its "format" (json_fields::format_version).
inline constexpr int kCleaningEvidenceFormat = 1;

struct CleaningStep {
  std::string name;    // "reset", "firmware", "erase", "scrub", "vf-neutral"
  std::string result;  // "passed", "failed" or "skipped"
  std::string detail;  // what was seen: a hash, a method, why it was skipped
  std::string started_at;
  std::string finished_at;
  bool operator==(const CleaningStep&) const = default;
};

struct CleaningEvidence {
  PciAddress device;
  std::string role;     // numa::to_string(PciRole): "gpu", "nvme", ...
  std::string vm;       // the VM that held it; "" none
  std::string outcome;  // "clean" (every step passed or was skipped with its reason) or "quarantined"
  std::string started_at;
  std::string finished_at;
  std::vector<CleaningStep> steps;
  bool operator==(const CleaningEvidence&) const = default;
};

struct EvidenceRecord {
  uint64_t sequence = 0;  // 1 for the first line, then one more per line
  CleaningEvidence evidence;
  std::string previous_sha256;  // the digest of the line before, as written (without its newline)
  std::string sha256;           // this line's digest, which the next line carries
};

struct EvidenceChain {
  std::vector<EvidenceRecord> records;  // oldest first, up to a break
  std::string broken;                   // "" when the chain is whole; else the line and why
};

class EvidenceLog {
 public:
  // Opens the log at file (created at the first append). A torn last line is cut durably;
  // `torn_bytes`, when given, says how much, for the caller to log.
  static Result<std::unique_ptr<EvidenceLog>> open(const std::filesystem::path& file,
                                                   std::size_t* torn_bytes = nullptr);

  // Appends one record chained on the last line, durably; refuses evidence that read would refuse.
  Result<EvidenceRecord> append(const CleaningEvidence& evidence);
  // Appends each, chained in order, in one durable write (one fsync for the lot); refuses them all
  // when one would be refused. A crash during the write keeps the lines before a torn one.
  Result<std::vector<EvidenceRecord>> append_all(const std::vector<CleaningEvidence>& evidence);
  // Every record, with the chain checked from the first line.
  Result<EvidenceChain> read() const;

 private:
  explicit EvidenceLog(std::filesystem::path file) : file_(std::move(file)) {}

  const std::filesystem::path file_;
  mutable std::mutex mutex_;
  uint64_t last_sequence_ = 0;
  std::string last_sha256_;  // of the last line; sha256("") before the first
};

}  // namespace hostagent::state
