// vmtemplates validation: the schema's defaults and accepted spellings, and every error with its
// exact file:line:column, what was found and what was expected.
#include <doctest/doctest.h>

#include "hostagent/vmtemplates/vm_template.hpp"
#include "template_checks.hpp"
#include "test_support.hpp"

namespace hostagent::vmtemplates {
namespace {

// A valid template on lines 1-3; cases append their keys from line 4.
const std::string kTopKeys =
    "name, description, abstract, extends, vcpus, memory, hugepage_size, allocation_threads, guest_numa, gpus, nics, "
    "nvme, peer_to_peer, machine, firmware, boot or metadata";

TEST_CASE("validation: a minimal template takes the documented defaults") {
  const VmTemplate shape = valid(kMinimalTemplate);
  CHECK(shape.name == "t");
  CHECK(shape.source == "t.yaml");
  CHECK(shape.description.empty());
  CHECK_FALSE(shape.abstract);
  CHECK(shape.vcpus == 4);
  CHECK(shape.memory_bytes == 8ULL << 30);
  CHECK(shape.hugepage_size_bytes == 1ULL << 30);
  CHECK(shape.allocation_threads == 0);  // auto: render counts the VM's CPUs
  CHECK(shape.guest_numa.mirror);
  CHECK(shape.gpus.count == 0);
  CHECK(shape.gpus.model.empty());
  CHECK(shape.gpus.ids.empty());
  CHECK(shape.nics.vfs_per_gpu == 0);
  CHECK(shape.nics.count == 0);
  CHECK(shape.nics.placement == NicPlacement::strict);
  CHECK(shape.nics.vf.mac == MacPolicy::automatic);
  CHECK_FALSE(shape.nics.vf.vlan.has_value());
  CHECK_FALSE(shape.nics.vf.trust.has_value());  // silent: the host's devices.vf decides
  CHECK_FALSE(shape.nics.vf.spoofchk.has_value());
  CHECK_FALSE(shape.nics.vf.mtu.has_value());
  CHECK(shape.nvme == 0);
  CHECK_FALSE(shape.peer_to_peer);
  CHECK(shape.machine == "q35");
  CHECK(shape.firmware == Firmware::efi);
  CHECK(shape.boot.image.empty());
  CHECK(shape.boot.cloud_init.empty());
  CHECK(shape.boot.kernel.empty());
  CHECK(shape.boot.initrd.empty());
  CHECK(shape.boot.cmdline.empty());
  CHECK(shape.metadata.empty());
}

TEST_CASE("validation: every field's other forms are read") {
  const VmTemplate shape = valid(kMinimalTemplate +
                                 "hugepage_size: 2MiB\n"
                                 "guest_numa: {cells: 2}\n"
                                 "gpus: {count: 2, vendor_id: 0x1002, device_id: 0x74A1}\n"
                                 "nics:\n"
                                 "  vfs_per_gpu: 2\n"
                                 "  count: 1\n"
                                 "  placement: prefer\n"
                                 "  vf: {mac: request, vlan: 4094, trust: yes, spoofchk: Off, mtu: 68}\n"
                                 "nvme: 64\n"
                                 "peer_to_peer: on\n"
                                 "machine: pc-q35-focal-hpb\n"
                                 "firmware: bios\n"
                                 "boot: {image: /images/a.qcow2, cloud_init: \"#cloud-config\\n\"}\n"
                                 "metadata: {team: research, _cost-center.id: \"42\"}\n");
  CHECK(shape.hugepage_size_bytes == 2ULL << 20);
  CHECK_FALSE(shape.guest_numa.mirror);
  CHECK(shape.guest_numa.cells == 2);
  CHECK(shape.gpus.count == 2);
  CHECK(shape.gpus.model.empty());
  CHECK(shape.gpus.ids == std::vector<PciId>{{0x1002, 0x74a1}});
  CHECK(shape.nics.vfs_per_gpu == 2);
  CHECK(shape.nics.count == 1);
  CHECK(shape.nics.placement == NicPlacement::prefer);
  CHECK(shape.nics.vf.mac == MacPolicy::request);
  CHECK(shape.nics.vf.vlan == 4094);
  CHECK(shape.nics.vf.trust == std::optional<bool>(true));
  CHECK(shape.nics.vf.spoofchk == std::optional<bool>(false));
  CHECK(shape.nics.vf.mtu == 68);
  CHECK(shape.nvme == 64);
  CHECK(shape.peer_to_peer);
  CHECK(shape.machine == "pc-q35-focal-hpb");
  CHECK(shape.firmware == Firmware::bios);
  CHECK(shape.boot.image == "/images/a.qcow2");
  CHECK(shape.boot.cloud_init == "#cloud-config\n");
  CHECK(shape.metadata == std::map<std::string, std::string>{{"team", "research"}, {"_cost-center.id", "42"}});
}

TEST_CASE("validation: GPUs are chosen by model, by device_id (NVIDIA by default), by ids, or not at all") {
  CHECK(valid(kMinimalTemplate + "gpus: {count: 1, model: V100}\n").gpus.ids ==
        std::vector<PciId>{{0x10de, 0x1db1}, {0x10de, 0x1db4}, {0x10de, 0x1db5}, {0x10de, 0x1db8}});
  CHECK(valid(kMinimalTemplate + "gpus: {count: 1, model: H200}\n").gpus.ids == std::vector<PciId>{{0x10de, 0x2335}});
  CHECK(valid(kMinimalTemplate + "gpus: {count: 1, model: A6000}\n").gpus.ids == std::vector<PciId>{{0x10de, 0x2230}});
  CHECK(valid(kMinimalTemplate + "gpus: {count: 1, device_id: 0x2330}\n").gpus.ids ==
        std::vector<PciId>{{0x10de, 0x2330}});
  CHECK(valid(kMinimalTemplate + "gpus: {count: 3, ids: [10de:2330, 10DE:2331]}\n").gpus.ids ==
        std::vector<PciId>{{0x10de, 0x2330}, {0x10de, 0x2331}});
  const VmTemplate any = valid(kMinimalTemplate + "gpus: {count: 4}\n");
  CHECK(any.gpus.count == 4);
  CHECK(any.gpus.ids.empty());
  CHECK(valid(kMinimalTemplate + "gpus: {count: 0}\nnics: {vfs_per_gpu: 0, count: 2}\n").nics.count == 2);
}

TEST_CASE("validation: null means the default, and quoting does not change a value's type") {
  const VmTemplate shape =
      valid(kMinimalTemplate + "gpus:\nnics: ~\nnvme: \"3\"\npeer_to_peer: 'true'\nmetadata: {}\n");
  CHECK(shape.gpus.count == 0);
  CHECK(shape.nvme == 3);
  CHECK(shape.peer_to_peer);
}

TEST_CASE("validation: unknown keys list the allowed ones and suggest the closest") {
  CHECK(problems(kMinimalTemplate + "vcpu: 4\n") ==
        "t.yaml:4:1: vcpu: found an unknown key, expected one of " + kTopKeys + " (did you mean \"vcpus\"?)");
  CHECK(problems(kMinimalTemplate + "hugepagesize: 1G\n") ==
        "t.yaml:4:1: hugepagesize: found an unknown key, expected one of " + kTopKeys +
            " (did you mean \"hugepage_size\"?)");
  CHECK(problems(kMinimalTemplate + "memroy: 1G\n") ==
        "t.yaml:4:1: memroy: found an unknown key, expected one of " + kTopKeys + " (did you mean \"memory\"?)");
  CHECK(problems(kMinimalTemplate + "colour: blue\n") ==
        "t.yaml:4:1: colour: found an unknown key, expected one of " + kTopKeys);
  CHECK(problems(kMinimalTemplate + "gpus:\n  count: 1\n  modle: H100\n") ==
        "t.yaml:6:3: gpus.modle: found an unknown key, expected one of count, model, vendor_id, device_id or ids "
        "(did you mean \"model\"?)");
  CHECK(problems(kMinimalTemplate + "nics: {vf: {spoofcheck: false}}\n") ==
        "t.yaml:4:13: nics.vf.spoofcheck: found an unknown key, expected one of mac, vlan, trust, spoofchk or mtu "
        "(did you mean \"spoofchk\"?)");
  CHECK(problems(kMinimalTemplate + "nics: {vf_per_gpu: 1}\n") ==
        "t.yaml:4:8: nics.vf_per_gpu: found an unknown key, expected one of mode, vfs_per_gpu, count, placement or vf "
        "(did you mean \"vfs_per_gpu\"?)");
  CHECK(problems(kMinimalTemplate + "guest_numa: {cell: 2}\n") ==
        "t.yaml:4:13: guest_numa.cells: found nothing (the key is missing), expected a whole number 1..14\n"
        "t.yaml:4:14: guest_numa.cell: found an unknown key, expected one of cells (did you mean \"cells\"?)");
  CHECK(problems(kMinimalTemplate + "boot: {imgae: /a}\n") ==
        "t.yaml:4:8: boot.imgae: found an unknown key, expected one of image, cloud_init, kernel, initrd, cmdline, "
        "from_nvme or watch (did you mean \"image\"?)");
  CHECK(problems(kMinimalTemplate + "boot: {kernel: /k, command_line: quiet}\n") ==
        "t.yaml:4:20: boot.command_line: found an unknown key, expected one of image, cloud_init, kernel, initrd, "
        "cmdline, from_nvme or watch");
}

TEST_CASE("validation: boot.from_nvme needs NVMe to boot from") {
  CHECK(
      problems(kMinimalTemplate + "boot: {from_nvme: true}\n") ==
      "t.yaml:4:19: boot.from_nvme: found \"true\" with nvme 0, expected nvme of 1 or more (the VM's NVMe are what it "
      "would boot from), or no boot.from_nvme");
  CHECK(valid(kMinimalTemplate + "nvme: 2\nboot: {from_nvme: true}\n").boot.from_nvme);
  CHECK_FALSE(valid(kMinimalTemplate + "nvme: 2\n").boot.from_nvme);
  CHECK(problems(kMinimalTemplate + "boot: {from_nvme: yes please}\n") ==
        "t.yaml:4:19: boot.from_nvme: found \"yes please\", expected true or false");
}

TEST_CASE("validation: boot.watch takes markers of one printable line and a watch of 1 to 3600 s") {
  const auto defaults = valid(kMinimalTemplate).boot.watch;
  CHECK(defaults.kernel_marker == "Linux version");
  CHECK(defaults.agent);
  CHECK(defaults.up_marker.empty());
  CHECK(defaults.seconds == 600);
  const auto set = valid(kMinimalTemplate +
                         "boot: {watch: {kernel_marker: 'Booting Linux', agent: false, up_marker: 'login:', "
                         "seconds: 90}}\n")
                       .boot.watch;
  CHECK(set.kernel_marker == "Booting Linux");
  CHECK_FALSE(set.agent);
  CHECK(set.up_marker == "login:");
  CHECK(set.seconds == 90);
  CHECK(problems(kMinimalTemplate + "boot: {watch: {up_marker: \"up\\nnow\"}}\n") ==
        "t.yaml:4:27: boot.watch.up_marker: found \"up\\nnow\", expected one line of 1 to 128 printable ASCII "
        "characters");
  CHECK(problems(kMinimalTemplate + "boot: {watch: {kernel_marker: ''}}\n") ==
        "t.yaml:4:31: boot.watch.kernel_marker: found \"\", expected one line of 1 to 128 printable ASCII characters");
  CHECK(problems(kMinimalTemplate + "boot: {watch: {seconds: 0}}\n") ==
        "t.yaml:4:25: boot.watch.seconds: found 0, expected a whole number 1..3600");
  CHECK(problems(kMinimalTemplate + "boot: {watch: {marker: x}}\n") ==
        "t.yaml:4:16: boot.watch.marker: found an unknown key, expected one of kernel_marker, agent, up_marker or "
        "seconds (did you mean \"up_marker\"?)");
}

TEST_CASE("validation: wrong types say what was found") {
  CHECK(problems(kMinimalTemplate + "gpus:\n  count: eight\n") ==
        "t.yaml:5:10: gpus.count: found \"eight\", expected a whole number 0..64");
  CHECK(problems("name: t\nvcpus: [1, 2]\nmemory: 8GiB\n") ==
        "t.yaml:2:8: vcpus: found a list, expected a whole number 1..1024");
  CHECK(problems("name: t\nvcpus: 4.0\nmemory: 8GiB\n") ==
        "t.yaml:2:8: vcpus: found \"4.0\", expected a whole number 1..1024");
  CHECK(problems(kMinimalTemplate + "gpus: 8\n") ==
        "t.yaml:4:7: gpus: found \"8\", expected a mapping with keys count, model, vendor_id, device_id or ids");
  CHECK(problems(kMinimalTemplate + "nics: [a]\n") ==
        "t.yaml:4:7: nics: found a list, expected a mapping with keys mode, vfs_per_gpu, count, placement or vf");
  CHECK(problems(kMinimalTemplate + "peer_to_peer: maybe\n") ==
        "t.yaml:4:15: peer_to_peer: found \"maybe\", expected true or false");
  CHECK(problems(kMinimalTemplate + "description: {a: 1}\n") ==
        "t.yaml:4:14: description: found a mapping, expected text");
  CHECK(problems(kMinimalTemplate + "memory: 8GiB\n").starts_with("t.yaml:4:1: memory: found a second \"memory\""));
  CHECK(problems("name: t\nvcpus: 4\nmemory: 8\n") ==
        "t.yaml:3:9: memory: found \"8\" (the unit is missing), expected a size like 1792GiB, 1280GB or 1G");
  CHECK(problems("name: t\nvcpus: 4\nmemory: 8 GiB\n") ==
        "t.yaml:3:9: memory: found \"8 GiB\" (unknown unit \" GiB\"), expected a size like 1792GiB, 1280GB or 1G");
  CHECK(problems(kMinimalTemplate + "hugepage_size: {a: 1}\n") ==
        "t.yaml:4:16: hugepage_size: found a mapping, expected a size like 1792GiB, 1280GB or 1G");
  CHECK(problems(kMinimalTemplate + "guest_numa: all\n") ==
        "t.yaml:4:13: guest_numa: found \"all\", expected mirror or a mapping {cells: N}");
  CHECK(problems(kMinimalTemplate + "nics: {vf: on}\n") ==
        "t.yaml:4:12: nics.vf: found \"on\", expected a mapping with keys mac, vlan, trust, spoofchk or mtu");
  CHECK(problems(kMinimalTemplate + "metadata: [a]\n") ==
        "t.yaml:4:11: metadata: found a list, expected a mapping of names to text");
  CHECK(problems(kMinimalTemplate + "metadata: {ok: [1]}\n") ==
        "t.yaml:4:16: metadata.ok: found a list, expected text");
  CHECK(problems(kMinimalTemplate + "boot: {cloud_init: {a: 1}}\n") ==
        "t.yaml:4:20: boot.cloud_init: found a mapping, expected text");
}

TEST_CASE("validation: values out of range name the range") {
  CHECK(problems("name: t\nvcpus: 0\nmemory: 8GiB\n") == "t.yaml:2:8: vcpus: found 0, expected a whole number 1..1024");
  CHECK(problems("name: t\nvcpus: 1025\nmemory: 8GiB\n") ==
        "t.yaml:2:8: vcpus: found 1025, expected a whole number 1..1024");
  CHECK(problems("name: t\nvcpus: 99999999999\nmemory: 8GiB\n") ==
        "t.yaml:2:8: vcpus: found \"99999999999\", expected a whole number 1..1024");
  CHECK(problems(kMinimalTemplate + "nvme: -1\n") == "t.yaml:4:7: nvme: found \"-1\", expected a whole number 0..64");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 65}\n") ==
        "t.yaml:4:15: gpus.count: found 65, expected a whole number 0..64");
  CHECK(problems(kMinimalTemplate + "nics: {count: 129}\n") ==
        "t.yaml:4:15: nics.count: found 129, expected a whole number 0..128");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1}\nnics: {vfs_per_gpu: 17}\n") ==
        "t.yaml:5:21: nics.vfs_per_gpu: found 17, expected a whole number 0..16");
  CHECK(problems(kMinimalTemplate + "nics:\n  vf:\n    vlan: 0\n") ==
        "t.yaml:6:11: nics.vf.vlan: found 0, expected a whole number 1..4094");
  CHECK(problems(kMinimalTemplate + "nics: {vf: {vlan: 4095}}\n") ==
        "t.yaml:4:19: nics.vf.vlan: found 4095, expected a whole number 1..4094");
  // YAML 1.1 reads 0100 as octal 64; refusing it keeps the author's intent unambiguous.
  CHECK(problems(kMinimalTemplate + "nics: {vf: {vlan: 0100}}\n") ==
        "t.yaml:4:19: nics.vf.vlan: found \"0100\", expected a whole number 1..4094");
  CHECK(problems(kMinimalTemplate + "nics: {vf: {mtu: 67}}\n") ==
        "t.yaml:4:18: nics.vf.mtu: found 67, expected a whole number 68..9216");
  CHECK(problems(kMinimalTemplate + "nics: {vf: {mtu: 9217}}\n") ==
        "t.yaml:4:18: nics.vf.mtu: found 9217, expected a whole number 68..9216");
  CHECK(problems(kMinimalTemplate + "guest_numa: {cells: 0}\n") ==
        "t.yaml:4:21: guest_numa.cells: found 0, expected a whole number 1..14");
  const std::string threads = "expected auto, or a whole number 1..16 (QEMU 7.2 runs at most 16 per guest cell)";
  CHECK(problems(kMinimalTemplate + "allocation_threads: 0\n") ==
        "t.yaml:4:21: allocation_threads: found 0, " + threads);
  CHECK(problems(kMinimalTemplate + "allocation_threads: 17\n") ==
        "t.yaml:4:21: allocation_threads: found 17, " + threads);
  CHECK(problems(kMinimalTemplate + "allocation_threads: many\n") ==
        "t.yaml:4:21: allocation_threads: found \"many\", " + threads);
  CHECK(valid(kMinimalTemplate + "allocation_threads: auto\n").allocation_threads == 0);
  CHECK(valid(kMinimalTemplate + "allocation_threads: 16\n").allocation_threads == 16);
}

TEST_CASE("validation: enumerations list their values and suggest the closest") {
  CHECK(problems(kMinimalTemplate + "firmware: uefi\n") ==
        "t.yaml:4:11: firmware: found \"uefi\", expected efi or bios (did you mean \"efi\"?)");
  CHECK(problems(kMinimalTemplate + "nics: {placement: loose}\n") ==
        "t.yaml:4:19: nics.placement: found \"loose\", expected strict or prefer");
  CHECK(problems(kMinimalTemplate + "nics: {vf: {mac: random}}\n") ==
        "t.yaml:4:18: nics.vf.mac: found \"random\", expected auto or request");
  CHECK(problems(kMinimalTemplate + "machine: pc-i440fx-7.2\n") ==
        "t.yaml:4:10: machine: found \"pc-i440fx-7.2\", expected q35 or a pc-q35-* machine type: the guest's PCIe "
        "tree is built from pxb-pcie, which needs q35");
}

TEST_CASE("validation: GPU models are the known ones, and PCI ids are hex") {
  const std::string known = "a known model (A100, A6000, H100, H200 or V100), or device_id or ids for another GPU";
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, model: B200}\n") ==
        "t.yaml:4:25: gpus.model: found \"B200\", expected " + known);
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, model: h100}\n") ==
        "t.yaml:4:25: gpus.model: found \"h100\", expected " + known + " (did you mean \"H100\"?)");
  // 2330 in decimal is 0x091a, another device: the 0x is required.
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, device_id: 2330}\n") ==
        "t.yaml:4:29: gpus.device_id: found \"2330\", expected a hex PCI id like 0x2330");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, vendor_id: 0x10de1, device_id: 0x2330}\n") ==
        "t.yaml:4:29: gpus.vendor_id: found \"0x10de1\", expected a hex PCI id like 0x2330");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, vendor_id: 0x10de}\n") ==
        "t.yaml:4:7: gpus.device_id: found nothing (the key is missing), expected a hex PCI id like 0x2330 beside "
        "vendor_id");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, ids: []}\n") ==
        "t.yaml:4:23: gpus.ids: found an empty list, expected a list of vendor:device ids in hex, like [10de:2330, "
        "10de:2331]");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, ids: 10de:2330}\n") ==
        "t.yaml:4:23: gpus.ids: found \"10de:2330\", expected a list of vendor:device ids in hex, like [10de:2330, "
        "10de:2331]");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, ids: [10de:2330, 10de-2331, 0x10de:0x2331]}\n") ==
        "t.yaml:4:35: gpus.ids[1]: found \"10de-2331\", expected vendor:device in hex, like 10de:2330\n"
        "t.yaml:4:46: gpus.ids[2]: found \"0x10de:0x2331\", expected vendor:device in hex, like 10de:2330");
}

TEST_CASE("validation: impossible combinations point at the value that cannot be") {
  CHECK(problems(kMinimalTemplate + "nics: {vfs_per_gpu: 1}\n") ==
        "t.yaml:4:21: nics.vfs_per_gpu: found 1 with no GPUs, expected 0 (or use nics.count): VFs per GPU need "
        "gpus.count above 0");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 0}\nnics: {vfs_per_gpu: 2}\n") ==
        "t.yaml:5:21: nics.vfs_per_gpu: found 2 with no GPUs, expected 0 (or use nics.count): VFs per GPU need "
        "gpus.count above 0");
  CHECK(problems("name: t\nvcpus: 4\nmemory: 1280GB\n") ==
        "t.yaml:3:9: memory: found \"1280GB\", expected a whole number of 1G hugepages, at least one (did you mean "
        "\"1280GiB\"?)");
  CHECK(problems("name: t\nvcpus: 4\nmemory: 3M\nhugepage_size: 2M\n") ==
        "t.yaml:3:9: memory: found \"3M\", expected a whole number of 2M hugepages, at least one");
  CHECK(problems("name: t\nvcpus: 4\nmemory: 0G\n") ==
        "t.yaml:3:9: memory: found \"0G\", expected a whole number of 1G hugepages, at least one");
  CHECK(problems(kMinimalTemplate + "hugepage_size: 4M\n") ==
        "t.yaml:4:16: hugepage_size: found \"4M\", expected 2M or 1G, the x86 hugepage sizes");
  CHECK(problems(kMinimalTemplate + "hugepage_size: 2MB\n") ==
        "t.yaml:4:16: hugepage_size: found \"2MB\", expected 2M or 1G, the x86 hugepage sizes");
  CHECK(problems(kMinimalTemplate + "guest_numa: {cells: 5}\n") ==
        "t.yaml:4:21: guest_numa.cells: found 5, expected at most vcpus (4): every guest cell needs a vCPU");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, model: H100, device_id: 0x2330}\n") ==
        "t.yaml:4:31: gpus.device_id: found a second GPU selector beside model, expected one of model, device_id "
        "(with vendor_id) or ids; write model: ~ to drop an inherited one");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1, ids: [10de:2330], model: A100}\n") ==
        "t.yaml:4:36: gpus.model: found a second GPU selector beside ids, expected one of model, device_id "
        "(with vendor_id) or ids; write ids: ~ to drop an inherited one");
  CHECK(problems(kMinimalTemplate + "boot: {image: images/a.qcow2}\n") ==
        "t.yaml:4:15: boot.image: found \"images/a.qcow2\", expected an absolute path on the host without '..'");
}

TEST_CASE("validation: direct kernel boot takes a kernel, an initrd and a command line, with or without an image") {
  const VmTemplate shape = valid(kMinimalTemplate +
                                 "boot:\n"
                                 "  kernel: /boot/vmlinuz-6.1.0-57-amd64\n"
                                 "  initrd: /var/lib/hostagent/initrd.img\n"
                                 "  cmdline: console=ttyS0 root=/dev/vda1 panic=-1 quiet\n"
                                 "  image: /images/a.qcow2\n");
  CHECK(shape.boot.kernel == "/boot/vmlinuz-6.1.0-57-amd64");
  CHECK(shape.boot.initrd == "/var/lib/hostagent/initrd.img");
  CHECK(shape.boot.cmdline == "console=ttyS0 root=/dev/vda1 panic=-1 quiet");
  CHECK(shape.boot.image == "/images/a.qcow2");
  const VmTemplate bare = valid(kMinimalTemplate + "boot: {kernel: /k}\n");
  CHECK(bare.boot.kernel == "/k");
  CHECK(bare.boot.initrd.empty());
  CHECK(bare.boot.cmdline.empty());
  CHECK(valid(kMinimalTemplate + "boot: {kernel: /k, cmdline: " + std::string(4096, 'x') + "}\n").boot.cmdline.size() ==
        4096);
  CHECK(valid(kMinimalTemplate + "boot: {kernel: /k, cmdline: \"root=LABEL=caf\xc3\xa9\"}\n").boot.cmdline ==
        "root=LABEL=caf\xc3\xa9");
}

TEST_CASE("validation: direct kernel boot paths are absolute, the command line is one bounded line") {
  CHECK(problems(kMinimalTemplate + "boot: {kernel: vmlinuz}\n") ==
        "t.yaml:4:16: boot.kernel: found \"vmlinuz\", expected an absolute path on the host without '..'");
  CHECK(problems(kMinimalTemplate + "boot: {kernel: /boot/../etc/k, initrd: /boot/..}\n") ==
        "t.yaml:4:16: boot.kernel: found \"/boot/../etc/k\", expected an absolute path on the host without '..'\n"
        "t.yaml:4:40: boot.initrd: found \"/boot/..\", expected an absolute path on the host without '..'");
  CHECK(problems(kMinimalTemplate + "boot: {kernel: [/k]}\n") ==
        "t.yaml:4:16: boot.kernel: found a list, expected text");
  CHECK(problems(kMinimalTemplate + "boot: {kernel: /k, cmdline: " + std::string(4097, 'x') + "}\n") ==
        "t.yaml:4:29: boot.cmdline: found a command line of 4097 bytes, expected one line of at most 4096 bytes");
  CHECK(problems(kMinimalTemplate + "boot:\n  kernel: /k\n  cmdline: >\n    console=ttyS0\n    quiet\n") ==
        "t.yaml:6:12: boot.cmdline: found \"console=ttyS0 quiet\\n\" (a control character or line break), "
        "expected one line of at most 4096 bytes");
  CHECK(problems(kMinimalTemplate + "boot: {kernel: /k, cmdline: \"a\\tb\\x7f\"}\n") ==
        "t.yaml:4:29: boot.cmdline: found \"a\\tb\\x7f\" (a control character or line break), expected one line of "
        "at most 4096 bytes");
}

TEST_CASE("validation: an initrd or a command line needs a kernel") {
  // The example in docs/templates.md.
  CHECK(problems(kMinimalTemplate + "boot:\n  initrd: /boot/initrd.img\n") ==
        "t.yaml:5:11: boot.initrd: found \"/boot/initrd.img\" with no boot.kernel, expected boot.kernel beside it: "
        "QEMU loads an initrd and a command line only with a kernel it boots directly");
  CHECK(problems(kMinimalTemplate + "boot: {image: /a.qcow2, cmdline: quiet}\n") ==
        "t.yaml:4:34: boot.cmdline: found \"quiet\" with no boot.kernel, expected boot.kernel beside it: QEMU loads "
        "an initrd and a command line only with a kernel it boots directly");
  // A wrong kernel is reported once, as itself, not again through the initrd that needs it.
  CHECK(problems(kMinimalTemplate + "boot: {kernel: k, initrd: /i}\n") ==
        "t.yaml:4:16: boot.kernel: found \"k\", expected an absolute path on the host without '..'");
}

TEST_CASE("validation: required keys are reported where the mapping starts") {
  CHECK(problems("description: nothing else\n") ==
        "t.yaml:1:1: name: found nothing (the key is missing), expected the template's name, like "
        "gx3d-160x1792x8h100\n"
        "t.yaml:1:1: vcpus: found nothing (the key is missing), expected a whole number 1..1024\n"
        "t.yaml:1:1: memory: found nothing (the key is missing), expected a size like 1792GiB");
  CHECK(problems(kMinimalTemplate + "gpus:\n  model: H100\n") ==
        "t.yaml:5:3: gpus.count: found nothing (the key is missing), expected a whole number 0..64");
  // An abstract template is a base: its missing keys come from the children.
  const VmTemplate base = valid("name: base\nabstract: true\ngpus: {model: H100}\nnics: {vfs_per_gpu: 1}\n");
  CHECK(base.abstract);
  CHECK(base.gpus.model == "H100");
  CHECK(base.nics.vfs_per_gpu == 1);
}

TEST_CASE("validation: names are safe as file and XML names") {
  CHECK(problems("name: ../etc/passwd\nvcpus: 4\nmemory: 8GiB\n") ==
        "t.yaml:1:7: name: found \"../etc/passwd\", expected a name: use 1-64 letters, digits, '.', '_' or '-', not "
        "starting with '.' or '-'");
  CHECK(problems(kMinimalTemplate + "metadata: {1team: a}\n") ==
        "t.yaml:4:12: metadata.1team: found \"1team\", expected a name of letters, digits, '.', '_' and '-', at most "
        "64, starting with a letter or '_'");
  CHECK(problems(kMinimalTemplate + "extends: base\n") ==
        "t.yaml:4:10: extends: found \"base\", expected no extends here: parents are looked up only when templates "
        "are loaded from files");
}

TEST_CASE("validation: broken YAML and documents that are not one mapping") {
  CHECK(problems("name: t\ngpus: [1\nvcpus: 2\n") ==
        "t.yaml:3:6: found invalid YAML (end of sequence flow not found), expected a mapping of template keys");
  // At the "---" that begins it (the parser's document start; issue 43 counts documents by it).
  CHECK(problems("name: t\nvcpus: 4\nmemory: 8GiB\n---\nname: u\n") ==
        "t.yaml:4:1: found a second YAML document, expected one template per file");
  CHECK(problems("- name: t\n") == "t.yaml:1:1: found a list, expected a mapping with keys " + kTopKeys);
  CHECK(problems("") == "t.yaml:1:1: found nothing, expected a mapping with keys " + kTopKeys);
  CHECK(problems(kMinimalTemplate + "vcpus: 8\n") ==
        "t.yaml:4:1: vcpus: found a second \"vcpus\" (the first is at 2:1), expected each key once");
  CHECK(problems(kMinimalTemplate + "? [a]\n: 1\n") == "t.yaml:4:3: found a list as a key, expected a key name");
  const std::string long_script(100, 'x');
  CHECK(problems(kMinimalTemplate + "nvme: " + long_script + "\n") ==
        "t.yaml:4:7: nvme: found \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...\", expected a whole number 0..64");
}

TEST_CASE("validation: every problem in a file is reported, in file order, one per line") {
  const std::string yaml =
      "name: gx3d\n"          // 1
      "vcpus: 2000\n"         // 2
      "memory: 1792GB\n"      // 3
      "hugepage_size: 1G\n"   // 4
      "gpus:\n"               // 5
      "  count: eight\n"      // 6
      "  model: H100\n"       // 7
      "nics:\n"               // 8
      "  vfs_per_gpu: 1\n"    // 9
      "  vf: {vlan: 5000}\n"  // 10
      "firmware: uefi\n";     // 11
  auto shape = parse_template(yaml, "gx3d.yaml", nullptr);
  REQUIRE_FALSE(shape.ok());
  CHECK(shape.error().message ==
        "gx3d.yaml:2:8: vcpus: found 2000, expected a whole number 1..1024\n"
        "gx3d.yaml:3:9: memory: found \"1792GB\", expected a whole number of 1G hugepages, at least one (did you mean "
        "\"1792GiB\"?)\n"
        "gx3d.yaml:6:10: gpus.count: found \"eight\", expected a whole number 0..64\n"
        "gx3d.yaml:10:14: nics.vf.vlan: found 5000, expected a whole number 1..4094\n"
        "gx3d.yaml:11:11: firmware: found \"uefi\", expected efi or bios (did you mean \"efi\"?)");
}

}  // namespace
TEST_CASE("validation: whole NICs (nics.mode pf) take a count and nothing that only a VF has") {
  const VmTemplate shape = valid(kMinimalTemplate + "gpus: {count: 8}\nnics: {mode: pf, count: 4}\n");
  CHECK(shape.nics.mode == NicMode::pf);
  CHECK(shape.nics.count == 4);
  CHECK(valid(kMinimalTemplate).nics.mode == NicMode::vf);
  CHECK(problems(kMinimalTemplate + "nics: {mode: whole}\n") ==
        "t.yaml:4:14: nics.mode: found \"whole\", expected vf or pf");
  CHECK(problems(kMinimalTemplate + "gpus: {count: 1}\nnics: {mode: pf, count: 1, vfs_per_gpu: 1}\n") ==
        "t.yaml:5:41: nics.vfs_per_gpu: found 1 with nics.mode pf, expected 0, or no vfs_per_gpu: with nics.mode "
        "pf the NICs go whole, nics.count of them");
  CHECK(problems(kMinimalTemplate + "nics:\n  mode: pf\n  count: 1\n  vf: {mtu: 9000}\n") ==
        "t.yaml:7:7: nics.vf: found VF settings with nics.mode pf, expected no nics.vf: a whole NIC has no VF to "
        "set; set its port on the host or in the guest");
  CHECK(problems(kMinimalTemplate + "nics: {mode: pf}\n") ==
        "t.yaml:4:7: nics.count: found none, expected 1 or more: with nics.mode pf, nics.count is how many whole "
        "NICs the VM gets");
  CHECK(problems(kMinimalTemplate + "nics: {mode: pf, count: 0}\n") ==
        "t.yaml:4:25: nics.count: found 0, expected 1 or more: with nics.mode pf, nics.count is how many whole "
        "NICs the VM gets");
}

}  // namespace hostagent::vmtemplates
