// vfio/function_reset against the fake kernel's reset and a config space that answers as told: a
// reset is written once and proved by the IDs coming back; a device that answers all ones, or as
// another device, past the polls is an error; no reset method is unsupported and writes nothing.
#include <doctest/doctest.h>

#include <cerrno>
#include <deque>
#include <filesystem>
#include <map>

#include "fake_host.hpp"
#include "hostagent/vfio/function_reset.hpp"
#include "test_support.hpp"

namespace hostagent::vfio {
namespace {

using testing::builtin_spec;
using testing::contains;
using testing::FakeHost;

const std::string kResetGpu = "0000:01:00.0";  // the quirks host's RTX A6000, 10de:2230
constexpr uint16_t kNvidia = 0x10de;
constexpr uint16_t kA6000 = 0x2230;

// Config space that answers each read of the ID registers from a script: {vendor, device} per poll,
// the last one repeated.
class ScriptedIds final : public ConfigSpace {
 public:
  explicit ScriptedIds(std::deque<std::pair<uint16_t, uint16_t>> answers) : answers_(std::move(answers)) {}
  Result<uint16_t> read16(const numa::PciAddress& /*device*/, int offset) override {
    const auto answer = answers_.front();
    if (offset == 0x02) {
      if (answers_.size() > 1) answers_.pop_front();
      return answer.second;
    }
    return answer.first;
  }
  Status write16(const numa::PciAddress& /*device*/, int /*offset*/, uint16_t /*value*/) override {
    return ok_status();
  }
  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& /*device*/, int /*cap_id*/) override {
    return std::optional<int>();
  }

 private:
  std::deque<std::pair<uint16_t, uint16_t>> answers_;
};

struct Waits {
  std::vector<std::chrono::milliseconds> slept;
  ResetPolling polling() {
    ResetPolling p;
    p.polls = 5;
    p.sleep = [this](std::chrono::milliseconds d) { slept.push_back(d); };
    return p;
  }
};

TEST_CASE("a reset is proved by the device answering with its IDs, after polls while it did not") {
  FakeHost host(builtin_spec("quirks"));
  ScriptedIds config({{0xffff, 0xffff}, {0xffff, 0xffff}, {kNvidia, kA6000}});
  Waits waits;
  const auto report = reset_and_verify(host.sysfs(), host.kernel(), config, *PciAddress::parse(kResetGpu),
                                       function_identity(kNvidia, kA6000), waits.polling());
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->polls == 3);
  CHECK(report->methods == "flr bus");
  CHECK(host.drivers().resets(kResetGpu) == 1);
  CHECK(waits.slept.size() == 2);
}

TEST_CASE("a device that does not come back, or comes back as another, is an error saying what it answered") {
  FakeHost host(builtin_spec("quirks"));
  Waits waits;
  ScriptedIds gone({{0xffff, 0xffff}});
  const auto silent = reset_and_verify(host.sysfs(), host.kernel(), gone, *PciAddress::parse(kResetGpu),
                                       function_identity(kNvidia, kA6000), waits.polling());
  REQUIRE_FALSE(silent.ok());
  CHECK(silent.error().code == ErrorCode::io_error);
  CHECK_MESSAGE(contains(silent.error().message,
                         "did not come back from its reset as 10de:2230: config space answered "
                         "ffff:ffff after 5 reads"),
                silent.error().message);
  CHECK(waits.slept.size() == 4);  // none after the last read
  ScriptedIds other({{0x10de, 0x1234}});
  const auto changed = reset_and_verify(host.sysfs(), host.kernel(), other, *PciAddress::parse(kResetGpu),
                                        function_identity(kNvidia, kA6000), waits.polling());
  REQUIRE_FALSE(changed.ok());
  CHECK(contains(changed.error().message, "answered 10de:1234"));
}

TEST_CASE("a function without a reset method cannot be shown clean, and a refused reset is an error") {
  FakeHost host(builtin_spec("quirks"));
  ScriptedIds config({{kNvidia, kA6000}});
  Waits waits;
  testing::write_text_file(host.host("/sys/bus/pci/devices/" + kResetGpu + "/reset_method"), "\n");
  const auto none = reset_and_verify(host.sysfs(), host.kernel(), config, *PciAddress::parse(kResetGpu),
                                     function_identity(kNvidia, kA6000), waits.polling());
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::unsupported);
  CHECK(contains(none.error().message, "no reset method"));
  CHECK(host.kernel().writes().empty());

  testing::write_text_file(host.host("/sys/bus/pci/devices/" + kResetGpu + "/reset_method"), "flr\n");
  host.kernel().fail_write(".*/reset", EIO);
  const auto refused = reset_and_verify(host.sysfs(), host.kernel(), config, *PciAddress::parse(kResetGpu),
                                        function_identity(kNvidia, kA6000), waits.polling());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::io_error);
  CHECK(host.drivers().resets(kResetGpu) == 0);
}

// Config space as fixed registers; any other reads as all ones, as nothing answering does.
class FixedRegisters final : public ConfigSpace {
 public:
  explicit FixedRegisters(std::map<int, uint16_t> values) : values_(std::move(values)) {}
  Result<uint16_t> read16(const numa::PciAddress& /*device*/, int offset) override {
    const auto it = values_.find(offset);
    return it == values_.end() ? uint16_t{0xffff} : it->second;
  }
  Status write16(const numa::PciAddress& /*device*/, int /*offset*/, uint16_t /*value*/) override {
    return ok_status();
  }
  Result<std::optional<int>> find_ext_capability(const numa::PciAddress& /*device*/, int /*cap_id*/) override {
    return std::optional<int>();
  }

 private:
  std::map<int, uint16_t> values_;
};

TEST_CASE("a VF is proved back by its class code, its ID registers reading all ones as a VF's must") {
  FakeHost host(builtin_spec("quirks"));
  Waits waits;
  // An NVMe VF (class 010802) after its FLR: IDs 0xFFFF (PCIe Base 6.0 9.3.4.1.1), the class real.
  FixedRegisters vf({{0x00, 0xffff}, {0x02, 0xffff}, {0x0a, 0x0108}});
  const auto device = *PciAddress::parse(kResetGpu);
  const auto back = reset_and_verify(host.sysfs(), host.kernel(), vf, device, vf_identity(0x010802), waits.polling());
  REQUIRE_MESSAGE(back.ok(), back.error().message);
  CHECK(back->polls == 1);
  // Its IDs would never answer: what the real kernel showed before VFs were told apart.
  const auto by_ids =
      reset_and_verify(host.sysfs(), host.kernel(), vf, device, function_identity(0x1b36, 0x0010), waits.polling());
  REQUIRE_FALSE(by_ids.ok());
  CHECK(contains(by_ids.error().message, "answered ffff:ffff"));
  // Nothing answering reads all ones everywhere: not a VF back.
  FixedRegisters gone({});
  const auto none = reset_and_verify(host.sysfs(), host.kernel(), gone, device, vf_identity(0x010802), waits.polling());
  REQUIRE_FALSE(none.ok());
  CHECK(contains(none.error().message, "as a VF of class 0108: config space answered ffff after"));
}

}  // namespace
}  // namespace hostagent::vfio
