// Domain calls against libvirt's test:///default driver, in process. Every test:///default
// connection in one process shares one driver state (libvirt 9 reference-counts the default
// connection; "connections share state" below checks it), so each test names its own domains.
#include <doctest/doctest.h>

#include <algorithm>
#include <pugixml.hpp>

#include "virt_fixture.hpp"

namespace hostagent::testing {
namespace {

using virt::DomainState;

struct DomainGuard {
  virt::Hypervisor& hypervisor;
  std::string name;
  ~DomainGuard() {
    (void)hypervisor.destroy(name);
    (void)hypervisor.undefine(name);
  }
};

std::string define_test_domain(virt::Hypervisor& hypervisor, const std::string& name) {
  auto uuid = hypervisor.define(domain_xml({.name = name, .template_name = "x"}));
  REQUIRE_MESSAGE(uuid.ok(), uuid.error().message);
  return uuid.value();
}

}  // namespace

TEST_CASE("define returns the UUID that lookup reports, with the metadata element") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("define");
  const DomainGuard guard{*hv, name};
  const std::string uuid = define_test_domain(*hv, name);
  CHECK(uuid.size() == 36);

  auto summary = hv->lookup(name);
  REQUIRE_MESSAGE(summary.ok(), summary.error().message);
  CHECK(summary->name == name);
  CHECK(summary->uuid == uuid);
  CHECK(summary->state == DomainState::shut_off);
  CHECK(summary->persistent);
  REQUIRE(summary->metadata.has_value());
  CHECK(summary->metadata->find(R"(template name="x")") != std::string::npos);
}

TEST_CASE("connections to test:///default in one process share the driver's state") {
  auto first = connect_hypervisor(kTestUri);
  auto second = connect_hypervisor(kTestUri);
  const std::string name = unique_name("shared");
  const DomainGuard guard{*first, name};
  define_test_domain(*first, name);
  CHECK(second->lookup(name).ok());
}

TEST_CASE("list holds a defined domain with metadata and the driver's own domain test without") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("list");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  auto domains = hv->list();
  REQUIRE_MESSAGE(domains.ok(), domains.error().message);
  const auto find = [&](const std::string& wanted) {
    return std::find_if(domains->begin(), domains->end(), [&](const auto& d) { return d.name == wanted; });
  };
  const auto ours = find(name);
  REQUIRE(ours != domains->end());
  CHECK(ours->metadata.has_value());
  const auto builtin = find("test");  // test:///default defines and runs "test" itself
  REQUIRE(builtin != domains->end());
  CHECK_FALSE(builtin->metadata.has_value());
  CHECK(builtin->state == DomainState::running);
}

TEST_CASE("all_stats answers every domain in one call, with what the driver reports: the test driver's state") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("stats");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);
  REQUIRE(hv->start(name).ok());
  auto stats = hv->all_stats();
  REQUIRE_MESSAGE(stats.ok(), stats.error().message);
  const auto ours = std::find_if(stats->begin(), stats->end(), [&](const auto& d) { return d.name == name; });
  REQUIRE(ours != stats->end());
  CHECK(ours->state == DomainState::running);
  CHECK_FALSE(ours->cpu_time_ns.has_value());  // libvirt's test driver reports no CPU time
  REQUIRE(hv->destroy(name).ok());
  stats = hv->all_stats();
  REQUIRE(stats.ok());
  const auto off = std::find_if(stats->begin(), stats->end(), [&](const auto& d) { return d.name == name; });
  REQUIRE(off != stats->end());
  CHECK(off->state == DomainState::shut_off);
}

TEST_CASE("a stats record is read by libvirt's documented field names, and fields it does not know are skipped") {
  using virt::StatField;
  const std::vector<StatField> fields{
      {"state.state", int64_t{1}},
      {"state.reason", int64_t{1}},
      {"cpu.time", uint64_t{123456789}},
      {"cpu.user", uint64_t{100}},
      {"vcpu.current", uint64_t{16}},
      {"vcpu.0.state", int64_t{1}},
      {"balloon.current", uint64_t{1048576}},
      {"balloon.maximum", uint64_t{2097152}},
      {"balloon.rss", uint64_t{524288}},
      {"net.count", uint64_t{1}},
      {"net.0.name", std::string("vnet3")},
      {"net.0.rx.bytes", uint64_t{10}},
      {"net.0.tx.bytes", uint64_t{20}},
      {"net.0.rx.pkts", uint64_t{1}},
      {"net.0.tx.pkts", uint64_t{2}},
      {"block.count", uint64_t{2}},
      {"block.1.name", std::string("sda")},
      {"block.1.rd.bytes", uint64_t{7}},
      {"block.0.name", std::string("vda")},
      {"block.0.rd.bytes", uint64_t{4096}},
      {"block.0.wr.bytes", uint64_t{8192}},
      {"block.0.rd.reqs", uint64_t{3}},
      {"block.0.wr.reqs", uint64_t{5}},
      {"block.0.allocation", uint64_t{99}},
      {"block.x.rd.bytes", uint64_t{1}},
      {"blocked", uint64_t{1}},
      {"cpu.time.extra", std::string("x")},
  };
  const auto stats = virt::domain_stats_of("vm1", fields);
  CHECK(stats.name == "vm1");
  CHECK(stats.state == DomainState::running);
  CHECK(stats.cpu_time_ns == 123456789U);
  CHECK(stats.vcpus == 16U);
  CHECK(stats.balloon_kib == 1048576U);
  CHECK(stats.balloon_max_kib == 2097152U);
  CHECK(stats.rss_kib == 524288U);
  CHECK(stats.blocks == std::vector<virt::BlockStats>{{"vda", 4096, 8192, 3, 5}, {"sda", 7, 0, 0, 0}});
  CHECK(stats.nets == std::vector<virt::NetStats>{{"vnet3", 10, 20, 1, 2}});
  // What a driver does not report stays unknown, never 0.
  const auto bare = virt::domain_stats_of("vm2", {{"state.state", int64_t{5}}});
  CHECK(bare.state == DomainState::shut_off);
  CHECK_FALSE(bare.cpu_time_ns.has_value());
  CHECK_FALSE(bare.rss_kib.has_value());
  CHECK(bare.blocks.empty());
}

TEST_CASE("start runs a domain and destroy stops it, twice without complaint") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("start");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  REQUIRE(hv->start(name).ok());
  CHECK(hv->lookup(name)->state == DomainState::running);
  const auto first = hv->destroy(name);
  CHECK_MESSAGE(first.ok(), first.error().message);
  CHECK(hv->lookup(name)->state == DomainState::shut_off);
  const auto second = hv->destroy(name);
  CHECK_MESSAGE(second.ok(), second.error().message);
}

// The test driver takes no start flags: the adapter starts and suspends it, which is what QEMU's
// paused start looks like from outside (events included: test_events).
TEST_CASE("start_paused leaves a domain paused until resume runs it, and resume again is ok") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("paused");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  const auto paused = hv->start_paused(name);
  REQUIRE_MESSAGE(paused.ok(), paused.error().message);
  CHECK(hv->lookup(name)->state == DomainState::paused);
  const auto again = hv->start_paused(name);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  REQUIRE(hv->resume(name).ok());
  CHECK(hv->lookup(name)->state == DomainState::running);
  const auto resumed_again = hv->resume(name);
  CHECK_MESSAGE(resumed_again.ok(), resumed_again.error().message);
  // A domain that is not running cannot be resumed: that is an error, not "done".
  REQUIRE(hv->destroy(name).ok());
  CHECK_FALSE(hv->resume(name).ok());
  CHECK(hv->resume(unique_name("absent")).error().code == ErrorCode::not_found);
}

TEST_CASE("shutdown stops a running domain and is ok on one that is not running") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("shutdown");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  const auto not_running = hv->shutdown(name);  // the test driver refuses with INTERNAL_ERROR here
  CHECK_MESSAGE(not_running.ok(), not_running.error().message);
  REQUIRE(hv->start(name).ok());
  REQUIRE(hv->shutdown(name).ok());
  CHECK(hv->lookup(name)->state == DomainState::shut_off);  // the test driver's guest obeys at once
}

TEST_CASE("undefine removes the definition and is ok when it is already gone") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("undefine");
  define_test_domain(*hv, name);

  const auto first = hv->undefine(name);  // the test driver refuses the NVRAM flag: falls back
  REQUIRE_MESSAGE(first.ok(), first.error().message);
  CHECK(hv->lookup(name).error().code == ErrorCode::not_found);
  const auto second = hv->undefine(name);
  CHECK_MESSAGE(second.ok(), second.error().message);
}

TEST_CASE("undefine of a running domain leaves it running as a transient domain") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("transient");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);
  REQUIRE(hv->start(name).ok());
  REQUIRE(hv->undefine(name).ok());
  auto summary = hv->lookup(name);
  REQUIRE(summary.ok());
  CHECK(summary->state == DomainState::running);
  CHECK_FALSE(summary->persistent);
}

TEST_CASE("a transient domain runs at once and is gone once destroyed") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("create-transient");
  const DomainGuard guard{*hv, name};
  auto uuid = hv->create_transient(domain_xml({.name = name, .template_name = "x"}));
  REQUIRE_MESSAGE(uuid.ok(), uuid.error().message);
  auto summary = hv->lookup(name);
  REQUIRE(summary.ok());
  CHECK(summary->uuid == *uuid);
  CHECK(summary->state == DomainState::running);
  CHECK_FALSE(summary->persistent);
  REQUIRE(hv->destroy(name).ok());
  CHECK(hv->lookup(name).error().code == ErrorCode::not_found);

  auto refused = hv->create_transient("<domain type='test'><name>" + name + "</name><memory>1024</memory></domain>");
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == ErrorCode::invalid_argument);
  CHECK(refused.error().message.find("create transient domain " + name + ": ") == 0);
}

TEST_CASE("calls on a missing domain are not_found and name it") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("missing");
  auto lookup = hv->lookup(name);
  REQUIRE_FALSE(lookup.ok());
  CHECK(lookup.error().code == ErrorCode::not_found);
  CHECK(lookup.error().message.find("look up domain " + name + ": ") == 0);
  CHECK(hv->start(name).error().code == ErrorCode::not_found);
  CHECK(hv->destroy(name).error().code == ErrorCode::not_found);
  CHECK(hv->domain_xml(name).error().code == ErrorCode::not_found);
}

TEST_CASE("malformed domain XML is invalid_argument with libvirt's message") {
  auto hv = connect_hypervisor(kTestUri);
  auto unparsable = hv->define("<domain type='test'><name>broken");
  REQUIRE_FALSE(unparsable.ok());
  CHECK(unparsable.error().code == ErrorCode::invalid_argument);
  INFO(unparsable.error().message);
  CHECK(unparsable.error().message.find("define domain: ") == 0);
  CHECK(unparsable.error().message.size() > std::string("define domain: ").size());

  const std::string name = unique_name("no-os");
  auto incomplete = hv->define("<domain type='test'><name>" + name + "</name><memory>1024</memory></domain>");
  REQUIRE_FALSE(incomplete.ok());
  CHECK(incomplete.error().code == ErrorCode::invalid_argument);
  INFO(incomplete.error().message);
  CHECK(incomplete.error().message.find("define domain " + name + ": ") == 0);
  CHECK(incomplete.error().message.find("os") != std::string::npos);
}

TEST_CASE("start of a running domain is conflict and reboot of a stopped one too") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("conflict");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  auto reboot = hv->reboot(name);
  REQUIRE_FALSE(reboot.ok());
  CHECK(reboot.error().code == ErrorCode::conflict);
  REQUIRE(hv->start(name).ok());
  auto again = hv->start(name);
  REQUIRE_FALSE(again.ok());
  CHECK(again.error().code == ErrorCode::conflict);
  CHECK(again.error().message.find("start domain " + name + ": ") == 0);
  CHECK(hv->reboot(name).ok());
}

TEST_CASE("domain_xml is the live definition of a running domain and the persistent one otherwise") {
  auto hv = connect_hypervisor(kTestUri);
  const std::string name = unique_name("xml");
  const DomainGuard guard{*hv, name};
  define_test_domain(*hv, name);

  const auto id_of = [&]() {
    auto xml = hv->domain_xml(name);
    REQUIRE_MESSAGE(xml.ok(), xml.error().message);
    pugi::xml_document doc;
    REQUIRE(doc.load_string(xml->c_str()));
    CHECK(std::string(doc.child("domain").child_value("name")) == name);
    CHECK(doc.child("domain").child("metadata").first_child());
    return std::string(doc.child("domain").attribute("id").as_string());
  };
  CHECK(id_of().empty());  // libvirt gives an id only to a running domain
  REQUIRE(hv->start(name).ok());
  CHECK_FALSE(id_of().empty());
}

}  // namespace hostagent::testing
