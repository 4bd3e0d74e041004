// nvme/nvme_erase against a fake controller that keeps a tenant's blocks until an erase reaches
// them (tests/support/fake_nvme.hpp): the method chosen from what the controller offers, the erase
// waited for, and the read back that catches a block the erase did not reach.
#include <doctest/doctest.h>

#include "fake_nvme.hpp"
#include "hostagent/nvme/nvme_erase.hpp"

namespace hostagent::nvme {
namespace {

using testing::fake_namespace;
using testing::FakeNvmeController;
using testing::FakeNvmeState;

ControllerInfo offering(uint16_t oacs, uint8_t fna, uint32_t sanicap) {
  return ControllerInfo{"Fake NVMe", oacs, fna, sanicap};
}

struct Eraser {
  FakeNvmeState state;
  int sleeps = 0;
  EraseOptions options;

  Eraser() {
    state.namespaces = {fake_namespace(1), fake_namespace(2, 64)};
    options.poll_interval = std::chrono::milliseconds(100);
    options.timeout = std::chrono::seconds(1);
    options.sleep = [this](std::chrono::milliseconds) { ++sleeps; };
  }
  // A tenant's pattern at the first, a middle and the last block of each namespace.
  void tenant_writes() {
    for (auto& ns : state.namespaces) {
      for (const uint64_t lba : {uint64_t{0}, ns.info.blocks / 2, ns.info.blocks - 1})
        state.write(ns.info.nsid, lba, 0xa5);
    }
  }
  Result<EraseReport> erase() {
    FakeNvmeController controller(state);
    return erase_controller(controller, options);
  }
};

}  // namespace

TEST_CASE("the strongest erase the controller offers is chosen, and none is a failure that names the controller") {
  CHECK(*choose_method(offering(kOacsFormat, kFnaCryptoErase, kSanicapCryptoErase | kSanicapBlockErase)) ==
        EraseMethod::sanitize_crypto);
  CHECK(*choose_method(offering(kOacsFormat, kFnaCryptoErase, kSanicapBlockErase)) == EraseMethod::sanitize_block);
  CHECK(*choose_method(offering(kOacsFormat, kFnaCryptoErase, 0)) == EraseMethod::format_crypto);
  CHECK(*choose_method(offering(kOacsFormat, 0, 0)) == EraseMethod::format_user_data);
  // Overwrite alone (SANICAP bit 2) is not offered as an erase: it takes hours and proves no more.
  const auto none = choose_method(offering(0, kFnaCryptoErase, 1U << 2));
  REQUIRE_FALSE(none.ok());
  CHECK(none.error().code == ErrorCode::unsupported);
  CHECK(none.error().message.find("Fake NVMe offers neither Sanitize") == 0);
}

TEST_CASE("a format with user data erase reaches each namespace, and every block read back is as DLFEAT says") {
  Eraser eraser;
  eraser.tenant_writes();
  const auto report = eraser.erase();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->method == EraseMethod::format_user_data);
  // FNA bit 0 clear: one format per namespace, each in user data erase.
  REQUIRE(eraser.state.formats.size() == 2);
  CHECK(eraser.state.formats[0] == std::pair<uint32_t, SecureErase>{1, SecureErase::user_data});
  CHECK(eraser.state.formats[1] == std::pair<uint32_t, SecureErase>{2, SecureErase::user_data});
  REQUIRE(report->read_back.size() == 2);
  CHECK(report->read_back[0].blocks_read == 16);
  CHECK(report->read_back[0].expected == std::optional<uint8_t>(0x00));
  CHECK(describe(*report) ==
        "format (user data erase) of Fake NVMe; namespace 1: 16 blocks read back, all 0x00; namespace 2: 16 blocks "
        "read back, all 0x00");
}

TEST_CASE("a controller whose format applies to all namespaces is formatted once, with NSID FFFFFFFFh") {
  Eraser eraser;
  eraser.state.info.fna = kFnaFormatAll | kFnaCryptoErase;
  eraser.tenant_writes();
  const auto report = eraser.erase();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->method == EraseMethod::format_crypto);
  REQUIRE(eraser.state.formats.size() == 1);
  CHECK(eraser.state.formats[0] == std::pair<uint32_t, SecureErase>{kAllNamespaces, SecureErase::cryptographic});
}

TEST_CASE("a sanitize is waited for through its status log, and its time is bounded") {
  Eraser eraser;
  eraser.state.info.sanicap = kSanicapCryptoErase;
  eraser.state.sanitize_polls = 3;
  eraser.tenant_writes();
  const auto report = eraser.erase();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->method == EraseMethod::sanitize_crypto);
  CHECK(eraser.state.sanitizes == std::vector<SanitizeAction>{SanitizeAction::crypto_erase});
  CHECK(eraser.state.formats.empty());
  CHECK(report->polls == 4);
  CHECK(eraser.sleeps == 3);
  CHECK(describe(*report).find("sanitize (crypto erase) of Fake NVMe, done after 4 reads of its status log") == 0);

  SUBCASE("one still running at the timeout fails, saying how far it got") {
    Eraser slow;
    slow.state.info.sanicap = kSanicapBlockErase;
    slow.state.sanitize_polls = 100;
    const auto late = slow.erase();
    REQUIRE_FALSE(late.ok());
    CHECK(late.error().message == "the sanitize did not finish within 1 s (at 15%)");
    CHECK(slow.state.sanitizes == std::vector<SanitizeAction>{SanitizeAction::block_erase});
    CHECK(slow.state.sanitize_reads == 10);
  }
  SUBCASE("one that left the blocks allocated is read back, and not judged against DLFEAT") {
    Eraser kept;
    kept.state.info.sanicap = kSanicapCryptoErase;
    kept.state.sanitize_keeps_allocated = true;
    kept.tenant_writes();
    const auto read = kept.erase();
    REQUIRE_MESSAGE(read.ok(), read.error().message);
    CHECK(read->read_back[0].expected == std::nullopt);
    CHECK(read->read_back[0].blocks_read == 16);
  }
  SUBCASE("one the controller says failed fails") {
    Eraser failing;
    failing.state.info.sanicap = kSanicapBlockErase;
    failing.state.sanitize_fails = true;
    const auto failed = failing.erase();
    REQUIRE_FALSE(failed.ok());
    CHECK(failed.error().message == "the sanitize failed (its status log says so)");
  }
}

TEST_CASE("a block the erase did not reach fails the read back, naming the block and what it holds") {
  Eraser eraser;
  eraser.tenant_writes();
  eraser.state.forgotten = {1023};  // the last block of namespace 1
  const auto report = eraser.erase();
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().code == ErrorCode::io_error);
  CHECK(report.error().message ==
        "block 1023 of namespace 1 still holds data after the erase (byte 0 is 0xa5; the controller says erased "
        "blocks read 0x00)");
}

TEST_CASE("blocks whose erased content the controller does not promise are read, and not judged, and it says so") {
  Eraser eraser;
  eraser.state.namespaces = {fake_namespace(1, 1024, 0)};
  eraser.state.info.fna = kFnaCryptoErase;
  eraser.tenant_writes();
  const auto report = eraser.erase();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(report->read_back[0].expected == std::nullopt);
  CHECK(report->read_back[0].blocks_read == 16);
  CHECK(describe(*report).find("content not judged (the controller does not say what erased blocks read as)") !=
        std::string::npos);
}

TEST_CASE("a namespace the tenant detached refuses a format, which would not reach it, and a sanitize reaches it") {
  Eraser eraser;
  eraser.state.info.oacs = kOacsFormat | kOacsNamespaceManagement;
  eraser.state.detached = {7};
  const auto refused = eraser.erase();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().message == "namespace 7 is not attached to the controller, so a format would not reach it");
  CHECK(eraser.state.formats.empty());

  eraser.state.info.sanicap = kSanicapBlockErase;
  CHECK(eraser.erase().ok());
}

TEST_CASE("a controller sharing its NVM subsystem with another is not erased: a sanitize would reach the other's") {
  Eraser eraser;
  eraser.state.info.sanicap = kSanicapCryptoErase;
  eraser.state.info.cmic = kCmicMultipleControllers;
  eraser.state.subsystem_controllers = 2;
  eraser.tenant_writes();
  const auto refused = eraser.erase();
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::conflict);
  CHECK(refused.error().message ==
        "Fake NVMe shares its NVM subsystem with 1 other controller(s), whose namespaces an erase through it could "
        "reach");
  CHECK(eraser.state.sanitizes.empty());
  CHECK(eraser.state.formats.empty());

  // A subsystem that may hold several controllers but holds this one alone is erased.
  eraser.state.subsystem_controllers = 1;
  CHECK(eraser.erase().ok());
  CHECK(eraser.state.sanitizes.size() == 1);
}

TEST_CASE("a command the controller refuses fails the erase with the controller's answer") {
  Eraser eraser;
  eraser.state.refuse = "format";
  const auto report = eraser.erase();
  REQUIRE_FALSE(report.ok());
  CHECK(report.error().message.find("Invalid Field in Command") != std::string::npos);
}

TEST_CASE("a controller without namespaces is erased and has nothing to read back") {
  Eraser eraser;
  eraser.state.namespaces.clear();
  const auto report = eraser.erase();
  REQUIRE_MESSAGE(report.ok(), report.error().message);
  CHECK(describe(*report) == "format (user data erase) of Fake NVMe; no active namespace to read back");
}

}  // namespace hostagent::nvme
