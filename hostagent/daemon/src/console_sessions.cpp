// daemon/console_sessions: the registry of consoles held through hostagent, and each session's
// bounded buffer between the guest's console (libvirt's event thread) and its client.
#include "console_sessions.hpp"

#include <functional>
#include <optional>

#include "daemon_log.hpp"
#include "hostagent/common/time_text.hpp"

namespace hostagent::daemon {
namespace console_detail {

class Joined;

}  // namespace console_detail

using console_detail::Joined;

struct ConsoleSessions::Entry {
  std::uint64_t id = 0;
  std::weak_ptr<Joined> session;  // live while a client holds the console
  std::string principal;
  std::string since;
};

// An entry stays from the open until libvirt has let go of the session's stream (its `released`),
// so an open that follows a session's end at once knows the stream may still be counted.
struct ConsoleSessions::Registry {
  std::mutex mutex;
  std::map<std::string, Entry> entries;  // by VM
  std::uint64_t next_id = 1;

  void erase(const std::string& vm, std::uint64_t id) {
    const std::lock_guard lock(mutex);
    const auto it = entries.find(vm);
    if (it != entries.end() && it->second.id == id) entries.erase(it);
  }
};

namespace console_detail {

class Joined final : public service::ConsoleSession {
 public:
  explicit Joined(std::string vm) : vm_(std::move(vm)) {}
  ~Joined() override { log(LogLevel::info, "console: the session on VM " + vm_ + " closed"); }
  Joined(const Joined&) = delete;
  Joined& operator=(const Joined&) = delete;

  void attach(std::unique_ptr<virt::Console> console) { console_ = std::move(console); }

  // The sinks hold the session weakly: one running as the session goes finds it gone.
  static virt::ConsoleSinks sinks(const std::shared_ptr<Joined>& joined, std::function<void()> released) {
    std::weak_ptr<Joined> weak = joined;
    return virt::ConsoleSinks{[weak](std::string_view bytes) {
                                if (auto self = weak.lock()) self->on_output(bytes);
                              },
                              [weak](const std::string& reason) {
                                if (auto self = weak.lock()) self->end(reason);
                              },
                              [weak] {
                                if (auto self = weak.lock()) self->on_writable();
                              },
                              std::move(released)};
  }

  std::string take() override {
    const std::lock_guard lock(mutex_);
    std::string out;
    if (dropped_ > 0) {
      out = "\r\n[hostagent: " + std::to_string(dropped_) +
            " bytes of the console's output were dropped: this client read more slowly than the guest wrote]\r\n";
      dropped_ = 0;
    }
    out += output_;
    output_.clear();
    return out;
  }

  std::size_t put(std::string_view bytes) override {
    {
      const std::lock_guard lock(mutex_);
      if (ended_ || !console_) return 0;
      room_ = false;
    }
    return console_->send(bytes);
  }

  void wait(std::function<void()> wake) override {
    {
      const std::lock_guard lock(mutex_);
      if (output_.empty() && dropped_ == 0 && !ended_ && !room_) {
        wake_ = std::move(wake);
        return;
      }
      room_ = false;  // told once
    }
    wake();
  }

  std::optional<std::string> ended() override {
    const std::lock_guard lock(mutex_);
    return ended_;
  }

  // The first reason wins: a session taken over is ended here before libvirt aborts its stream.
  void end(const std::string& reason) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      if (ended_) return;
      ended_ = reason;
      wake = std::exchange(wake_, nullptr);
    }
    log(LogLevel::info, "console: the session on VM " + vm_ + " ended: " + reason);
    if (wake) wake();
  }

 private:
  void on_output(std::string_view bytes) {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      output_.append(bytes);
      if (output_.size() > service::kConsoleOutputBytes) {
        const std::size_t excess = output_.size() - service::kConsoleOutputBytes;
        output_.erase(0, excess);
        dropped_ += excess;
      }
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }

  void on_writable() {
    std::function<void()> wake;
    {
      const std::lock_guard lock(mutex_);
      room_ = true;
      wake = std::exchange(wake_, nullptr);
    }
    if (wake) wake();
  }

  const std::string vm_;
  std::unique_ptr<virt::Console> console_;  // set once, before the session is handed out
  std::mutex mutex_;
  std::string output_;         // at most kConsoleOutputBytes
  std::uint64_t dropped_ = 0;  // since the last take()
  std::optional<std::string> ended_;
  bool room_ = false;  // input has room again since the last put()
  std::function<void()> wake_;
};

}  // namespace console_detail

ConsoleSessions::ConsoleSessions(virt::Hypervisor& hypervisor, Clock& clock)
    : hypervisor_(hypervisor), clock_(clock), registry_(std::make_shared<Registry>()) {}

Result<std::shared_ptr<service::ConsoleSession>> ConsoleSessions::open(const VmName& name, bool take_over,
                                                                       const std::string& principal) {
  const std::string& vm = name.str();
  auto joined = std::make_shared<Joined>(vm);
  std::uint64_t id = 0;
  bool force = false;
  std::string took_from;
  std::shared_ptr<Joined> held;  // out here: if it is the last reference, it goes after the lock
  {
    const std::lock_guard lock(registry_->mutex);
    const auto it = registry_->entries.find(vm);
    if (it != registry_->entries.end()) {
      held = it->second.session.lock();
      if (held && !held->ended()) {
        if (!take_over) {
          return Error{ErrorCode::conflict, "the serial console of VM " + vm + " is held by " + it->second.principal +
                                                " since " + it->second.since +
                                                "; ask again with take_over=true to end that session and take it"};
        }
        held->end("taken over by " + principal);
        took_from = it->second.principal;
      }
      // hostagent's own earlier stream, held, ended or being let go: libvirt may count it still.
      force = true;
    }
    id = registry_->next_id++;
    registry_->entries[vm] = Entry{id, joined, principal, rfc3339(clock_.now())};
  }
  std::function<void()> released = [registry = registry_, vm, id] { registry->erase(vm, id); };
  auto console = hypervisor_.open_console(vm, force, Joined::sinks(joined, std::move(released)));
  if (!console.ok()) {
    registry_->erase(vm, id);
    return console.error();
  }
  joined->attach(std::move(console).value());
  log(LogLevel::info,
      "console: VM " + vm + " opened by " + principal + (took_from.empty() ? "" : ", taken over from " + took_from));
  return std::shared_ptr<service::ConsoleSession>(std::move(joined));
}

}  // namespace hostagent::daemon
