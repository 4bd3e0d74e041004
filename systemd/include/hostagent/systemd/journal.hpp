// systemd/journal: log records in the journal's native protocol with structured fields
// (MESSAGE, PRIORITY, HOSTAGENT_VM, HOSTAGENT_OPERATION, HOSTAGENT_DEVICE), used when stderr is
// connected to the journal; `journalctl HOSTAGENT_VM=train-0` then finds a VM's lines.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "hostagent/common/result.hpp"

namespace hostagent::systemd {

// What a log line is about; "" where it has none. Written with designated initializers
// ({.vm = name, .operation = "create"}); the {} initializers keep GCC's -Wmissing-field-initializers
// quiet about the fields left out.
struct JournalContext {
  std::string vm{};         // "train-0"
  std::string operation{};  // "create", "delete", "start", "stop", "reboot"
  std::string device{};     // a PCI function, "0000:3b:00.0"
};

// syslog(3) priorities, as PRIORITY= carries them.
constexpr int kPriorityError = 3;
constexpr int kPriorityWarning = 4;
constexpr int kPriorityInfo = 6;

// "MESSAGE=...", "PRIORITY=6", then the context's fields that are set, in that order.
std::vector<std::string> journal_fields(int priority, std::string_view message, const JournalContext& context);

// Whether $JOURNAL_STREAM ("DEVICE:INODE", systemd.exec(5)) names the file with this device and
// inode: a service's stderr when systemd connected it to the journal, and not once it was
// redirected elsewhere. False for null or malformed text.
bool journal_stream_names(const char* journal_stream, dev_t device, ino_t inode);

// journal_stream_names($JOURNAL_STREAM, stderr's fstat(2)).
bool stderr_is_journal();

// One record through sd_journal_sendv(3).
Status send_to_journal(const std::vector<std::string>& fields);

}  // namespace hostagent::systemd
