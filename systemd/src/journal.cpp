// systemd/journal: native journal records and the JOURNAL_STREAM check.
#include "hostagent/systemd/journal.hpp"

#include <sys/stat.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include <charconv>
#include <cstdint>
#include <cstdlib>

namespace hostagent::systemd {
namespace {

// A whole decimal number and nothing else.
template <typename T>
bool parse_decimal(std::string_view text, T& out) {
  if (text.empty()) return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

std::vector<std::string> journal_fields(int priority, std::string_view message, const JournalContext& context) {
  std::vector<std::string> fields;
  fields.reserve(5);
  fields.push_back("MESSAGE=" + std::string(message));
  fields.push_back("PRIORITY=" + std::to_string(priority));
  if (!context.vm.empty()) fields.push_back("HOSTAGENT_VM=" + context.vm);
  if (!context.operation.empty()) fields.push_back("HOSTAGENT_OPERATION=" + context.operation);
  if (!context.device.empty()) fields.push_back("HOSTAGENT_DEVICE=" + context.device);
  return fields;
}

bool journal_stream_names(const char* journal_stream, dev_t device, ino_t inode) {
  if (journal_stream == nullptr) return false;
  const std::string_view text(journal_stream);
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return false;
  uint64_t stream_device = 0;
  uint64_t stream_inode = 0;
  if (!parse_decimal(text.substr(0, colon), stream_device) || !parse_decimal(text.substr(colon + 1), stream_inode)) {
    return false;
  }
  return stream_device == static_cast<uint64_t>(device) && stream_inode == static_cast<uint64_t>(inode);
}

bool stderr_is_journal() {
  const char* stream = std::getenv("JOURNAL_STREAM");
  if (stream == nullptr) return false;
  struct stat info {};
  if (::fstat(STDERR_FILENO, &info) != 0) return false;
  return journal_stream_names(stream, info.st_dev, info.st_ino);
}

Status send_to_journal(const std::vector<std::string>& fields) {
  std::vector<iovec> vectors;
  vectors.reserve(fields.size());
  for (const auto& field : fields) {
    // sd_journal_sendv takes the fields as they are (no printf); a value with a newline is sent in
    // the protocol's binary form.
    vectors.push_back(iovec{const_cast<char*>(field.data()), field.size()});
  }
  const int rc = ::sd_journal_sendv(vectors.data(), static_cast<int>(vectors.size()));
  if (rc < 0) return errno_error(-rc, "sd_journal_sendv to", "/run/systemd/journal/socket");
  return ok_status();
}

}  // namespace hostagent::systemd
