// verify/qemu_process: /proc's text as the kernel writes it (the lines are a real stand-in's, QEMU
// 7.2 under libvirt 9.0), the process found by its command line, and the ties held or not.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>

#include "hostagent/verify/qemu_process.hpp"
#include "test_support.hpp"

namespace hostagent::verify {
namespace {

constexpr std::string_view kNumaMaps =
    "55d1c4a00000 default file=/usr/bin/qemu-system-x86_64 mapped=1203 mapmax=3 N0=1203 kernelpagesize_kB=4\n"
    "7f105fe00000 bind:0 file=/dev/hugepages/libvirt/qemu/6-rec-vela2/qemu_back_mem.ram-node0.XbrQIT\\040(deleted) "
    "huge anon=128 dirty=128 N0=128 kernelpagesize_kB=2048\n"
    "7f1070000000 bind=static:1 file=/dev/hugepages/libvirt/qemu/6-rec-vela2/qemu_back_mem.ram-node1.Ab12Cd\\040"
    "(deleted) huge anon=100 dirty=100 N1=100 kernelpagesize_kB=2048\n"
    "7f1090000000 default anon=20 dirty=20 N0=20 kernelpagesize_kB=4\n"
    "7f10a0000000 bind:1 file=/memfd:ram-node12\\040(deleted) dirty=28 N1=28 kernelpagesize_kB=4\n";

TEST_CASE("numa_maps: each backend of a guest cell, its policy and where its pages are") {
  const auto cells = parse_numa_maps(kNumaMaps);
  REQUIRE_MESSAGE(cells.ok(), cells.error().message);
  REQUIRE(cells->size() == 3);
  CHECK((*cells)[0].cell == 0);
  CHECK((*cells)[0].policy == "bind");
  CHECK((*cells)[0].policy_nodes == std::vector<int>{0});
  CHECK((*cells)[0].on_node == std::map<int, uint64_t>{{0, 128}});
  CHECK((*cells)[0].page_kib == 2048);
  CHECK((*cells)[1].cell == 1);
  CHECK((*cells)[1].policy == "bind");  // mode flags (=static) are not the mode
  CHECK((*cells)[1].policy_nodes == std::vector<int>{1});
  CHECK((*cells)[2].cell == 12);  // a memfd backend; "ram-node12", not node 1
  CHECK((*cells)[2].page_kib == 4);

  CHECK_FALSE(parse_numa_maps("7f10 bind:0 file=/x/ram-node0 N0=x kernelpagesize_kB=4\n").ok());
  CHECK_FALSE(parse_numa_maps("7f10 bind:2-1 file=/x/ram-node0 kernelpagesize_kB=4\n").ok());
  // A backend in two mappings is one cell, its pages summed.
  const auto split = parse_numa_maps(
      "7f00 bind:0 file=/h/qemu_back_mem.ram-node0.a huge N0=10 kernelpagesize_kB=2048\n"
      "7f80 bind:0 file=/h/qemu_back_mem.ram-node0.a huge N0=6 kernelpagesize_kB=2048\n");
  REQUIRE(split.ok());
  REQUIRE(split->size() == 1);
  CHECK(split->front().on_node.at(0) == 16);
  CHECK(split->front().policy == "bind");
  // Part of it under another policy: mixed, which check_ties never takes for bound.
  const auto mixed = parse_numa_maps(
      "7f00 bind:0 file=/h/qemu_back_mem.ram-node0.a huge N0=10 kernelpagesize_kB=2048\n"
      "7f80 default file=/h/qemu_back_mem.ram-node0.a huge N0=6 kernelpagesize_kB=2048\n");
  REQUIRE(mixed.ok());
  CHECK(mixed->front().policy == "mixed");
  CHECK(mixed->front().policy_nodes.empty());
}

TEST_CASE("a thread's status: its name and the CPUs the kernel lets it run on") {
  const auto thread = parse_thread_status(
      4242, "Name:\tCPU 3/TCG\nUmask:\t0022\nState:\tS (sleeping)\nCpus_allowed:\t3\nCpus_allowed_list:\t0-1\n");
  REQUIRE(thread.ok());
  CHECK(thread->tid == 4242);
  CHECK(thread->name == "CPU 3/TCG");
  CHECK(thread->cpus == std::vector<int>{0, 1});
  CHECK(vcpu_of_thread(thread->name) == 3);
  CHECK(vcpu_of_thread("CPU 12/KVM") == 12);
  CHECK(vcpu_of_thread("TC tc-ram-node0") == std::nullopt);
  CHECK(vcpu_of_thread("CPU x/TCG") == std::nullopt);
  CHECK_FALSE(parse_thread_status(1, "Name:\tworker\n").ok());
}

TEST_CASE("QEMU's command line names its domain after -name guest=, commas doubled") {
  using namespace std::string_literals;
  const auto line = "/usr/bin/qemu-system-x86_64\0-name\0guest=vt,,1,debug-threads=on\0-S\0"s;
  CHECK(is_qemu_of(line, "vt,1"));
  CHECK_FALSE(is_qemu_of(line, "vt"));
  CHECK_FALSE(is_qemu_of(line, "vt,,1"));
  CHECK(is_qemu_of("qemu\0-name\0guest=a\0"s, "a"));
  CHECK_FALSE(is_qemu_of("qemu\0-S\0guest=a,\0"s, "a"));  // not after -name
  CHECK_FALSE(is_qemu_of("bash\0-c\0-name guest=a,\0"s, "a"));
}

// A /proc with one QEMU process (pid 300) of the stand-in, beside another domain's and a shell.
struct FakeProc {
  testing::TempDir root;
  void write(const std::string& path, std::string_view text) const {
    std::filesystem::create_directories((root.path() / path).parent_path());
    std::ofstream(root.path() / path, std::ios::binary) << text;
  }
  void thread(int pid, int tid, const std::string& name, const std::string& cpus) const {
    write("proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/status",
          "Name:\t" + name + "\nCpus_allowed_list:\t" + cpus + "\n");
  }
  FakeProc() {
    using namespace std::string_literals;
    write("proc/1/cmdline", "/sbin/init\0"s);
    write("proc/200/cmdline", "/usr/bin/qemu-system-x86_64\0-name\0guest=other,debug-threads=on\0"s);
    write("proc/300/cmdline", "/usr/bin/qemu-system-x86_64\0-name\0guest=stand-in,debug-threads=on\0"s);
    thread(300, 300, "qemu-system-x86", "0");
    thread(300, 301, "CPU 1/TCG", "2-3");
    thread(300, 302, "CPU 0/TCG", "2-3");
    thread(300, 303, "worker", "0");
    write("proc/300/numa_maps",
          "7f00 bind:1 file=/h/qemu_back_mem.ram-node0.a huge N1=128 kernelpagesize_kB=2048\n"
          "7f80 bind:1 file=/h/qemu_back_mem.ram-node1.b huge N1=100 N0=28 kernelpagesize_kB=2048\n");
    write("proc/self", "");  // not a pid
  }
};

StandIn stand_in_tied() {
  StandIn out;
  out.ties.emulator_cpus = {0};
  out.ties.vcpu_cpus = {{2, 3}, {2, 3}};
  out.ties.cell_nodes = {{0, 1}, {1, 1}};
  return out;
}

TEST_CASE("the stand-in's process is found by its name and read: threads by tid, main first, and cells") {
  FakeProc proc;
  const auto machine = SysfsRoot::open(proc.root.path());
  REQUIRE(machine.ok());
  const auto process = read_qemu_process(*machine, "stand-in");
  REQUIRE_MESSAGE(process.ok(), process.error().message);
  REQUIRE(process->has_value());
  const auto& p = **process;
  CHECK(p.pid == 300);
  REQUIRE(p.threads.size() == 4);
  CHECK(p.threads.front().tid == 300);
  REQUIRE(p.vcpu_thread(0) != nullptr);
  CHECK(p.vcpu_thread(0)->tid == 302);
  CHECK(p.vcpu_thread(2) == nullptr);
  CHECK(p.cells.size() == 2);
  const auto none = read_qemu_process(*machine, "elsewhere");
  REQUIRE(none.ok());
  CHECK_FALSE(none->has_value());
}

TEST_CASE("the ties: held where the kernel agrees, a finding naming both sides where it does not") {
  FakeProc proc;
  const auto machine = SysfsRoot::open(proc.root.path());
  REQUIRE(machine.ok());
  auto process = **read_qemu_process(*machine, "stand-in");
  auto stand_in = stand_in_tied();

  SUBCASE("cell 1 has pages on node 0 though it is bound to node 1") {
    const auto check = check_ties(stand_in, process);
    CHECK(check.held.size() == 4);  // emulator, two vCPUs, cell 0
    REQUIRE(check.findings.size() == 1);
    CHECK(check.findings[0] == "cell 1's memory is bound to node 1 but has 56 MiB on node 0, 200 MiB on node 1");
  }
  SUBCASE("all held") {
    process.cells[1].on_node = {{1, 128}};
    const auto check = check_ties(stand_in, process);
    CHECK(check.findings.empty());
    CHECK(check.held == std::vector<std::string>{"emulator: QEMU's main thread on CPU(s) 0",
                                                 "vCPU 0: its thread on CPU(s) 2-3", "vCPU 1: its thread on CPU(s) 2-3",
                                                 "cell 0's memory: bound to node 1, 256 MiB on node 1",
                                                 "cell 1's memory: bound to node 1, 256 MiB on node 1"});
  }
  SUBCASE("an unpinned emulator, a vCPU on the wrong CPUs, a missing vCPU thread, a policy not bind") {
    process.cells[1].on_node = {{1, 128}};
    process.threads[0].cpus = {0, 1, 2, 3};
    stand_in.ties.vcpu_cpus = {{2}, {2, 3}, {3}};
    process.cells[0].policy = "default";
    process.cells[0].policy_nodes.clear();
    const auto check = check_ties(stand_in, process);
    REQUIRE(check.findings.size() == 4);
    CHECK(check.findings[0] == "QEMU's main thread (pid 300) may run on CPUs 0-3, the emulator is pinned to 0");
    CHECK(check.findings[1] == "vCPU 0: its thread (CPU 0/TCG) may run on CPUs 2-3, it is pinned to 2");
    CHECK(check.findings[2] == "vCPU 2: QEMU has no thread for it");
    CHECK(check.findings[3] == "cell 0's memory: policy default, the stand-in binds it strictly to node 1");
  }
  SUBCASE("a cell whose memory is anonymous is reported unread, not held") {
    process.cells.pop_back();
    const auto check = check_ties(stand_in, process);
    CHECK(check.findings.empty());
    REQUIRE(check.unread.size() == 1);
    CHECK(check.unread[0].starts_with("cell 1's memory: anonymous"));
  }
}

}  // namespace
}  // namespace hostagent::verify
