// hostagentctl template validate (hostagent/ctl/template_command): its output and exit code.
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>

#include "template_command.hpp"
#include "test_support.hpp"

namespace hostagent::ctl {
namespace {

namespace fs = std::filesystem;

const fs::path kShipped = hostagent::testing::shipped_templates_dir();

struct Run {
  int code = -1;
  std::string out;
  std::string err;
};

Run validate(const std::vector<std::string>& files, const std::vector<fs::path>& dirs = {}) {
  std::ostringstream out;
  std::ostringstream err;
  const int code = run_template_validate(files, dirs, out, err);
  return Run{code, out.str(), err.str()};
}

TEST_CASE("template validate: every shipped template is ok, with a one-line summary") {
  std::vector<std::string> files;
  for (const char* name :
       {"gx3d-160x1792x8h100", "gx2-80x1280x8a100", "gx3-16x128x1h100", "gx3-32x256x2h100", "cx-2x1", "base-h100"}) {
    files.push_back((kShipped / (std::string(name) + ".yaml")).string());
  }
  const Run run = validate(files);
  CHECK(run.code == 0);
  CHECK(run.err.empty());
  CHECK(run.out == files[0] +
                       ": ok (gx3d-160x1792x8h100, 160 vCPUs, 1792GiB in 1G pages, 8 H100 GPUs, 1 VF per GPU, 8 NVMe, "
                       "peer-to-peer)\n" +
                       files[1] +
                       ": ok (gx2-80x1280x8a100, 80 vCPUs, 1280GiB in 1G pages, 8 A100 GPUs, 2 front-end VFs, 4 NVMe, "
                       "peer-to-peer)\n" +
                       files[2] + ": ok (gx3-16x128x1h100, 16 vCPUs, 128GiB in 1G pages, 1 H100 GPU, 1 VF per GPU)\n" +
                       files[3] +
                       ": ok (gx3-32x256x2h100, 32 vCPUs, 256GiB in 1G pages, 2 H100 GPUs, 1 VF per GPU, "
                       "peer-to-peer)\n" +
                       files[4] + ": ok (cx-2x1, 2 vCPUs, 1GiB in 2M pages, 1 NUMA cell)\n" + files[5] +
                       ": ok (base-h100, abstract: a base for extends)\n");
}

TEST_CASE("template validate: errors go to err with file:line:column, and the exit code is 1") {
  const testing::TempDir tmp;
  const fs::path good = tmp.path() / "good.yaml";
  const fs::path bad = tmp.path() / "gx3d.yaml";
  std::ofstream(good) << "name: good\nvcpus: 2\nmemory: 512M\nhugepage_size: 2M\n"
                         "gpus: {count: 1, ids: [10de:2330, 10de:2331]}\n";
  std::ofstream(bad) << "name: gx3d\nextends: base-h100\nvcpus: 160\nmemory: 1792GiB\n"
                        "gpus:\n  count: eight\n";
  const Run run = validate({good.string(), bad.string()}, {kShipped});
  CHECK(run.code == 1);
  CHECK(run.out == good.string() + ": ok (good, 2 vCPUs, 512MiB in 2M pages, 1 GPU (10de:2330|10de:2331))\n");
  CHECK(run.err == bad.string() +
                       ":6:10: gpus.count: found \"eight\", expected a whole number 0..64\n"
                       "1 of 2 templates are invalid\n");

  const Run one = validate({bad.string()}, {kShipped});
  CHECK(one.code == 1);
  CHECK(one.out.empty());
  CHECK(one.err == bad.string() + ":6:10: gpus.count: found \"eight\", expected a whole number 0..64\n");
}

TEST_CASE("template validate: parents come from the search directories, and without them extends fails") {
  const testing::TempDir tmp;
  const fs::path child = tmp.path() / "mine.yaml";
  std::ofstream(child) << "name: mine\nextends: base-h100\nvcpus: 8\nmemory: 64GiB\ngpus: {count: 1}\n";
  const Run found = validate({child.string()}, {kShipped});
  CHECK(found.code == 0);
  CHECK(found.out == child.string() + ": ok (mine, 8 vCPUs, 64GiB in 1G pages, 1 H100 GPU, peer-to-peer)\n");

  const Run lost = validate({child.string()});
  CHECK(lost.code == 1);
  CHECK(lost.err == child.string() +
                        ":2:10: extends: found \"base-h100\", expected a parent template (no base-h100.yaml in " +
                        tmp.path().string() + ")\n");
}

TEST_CASE("template validate: a missing file and no files at all") {
  const Run missing = validate({"/nonexistent/t.yaml"});
  CHECK(missing.code == 1);
  CHECK(missing.err == "read /nonexistent/t.yaml: No such file or directory\n");
  const Run none = validate({});
  CHECK(none.code == 1);
  CHECK(none.err == "template validate: no template files given\n");
}

TEST_CASE("template validate: summaries of GPUs chosen by id or by nothing") {
  vmtemplates::VmTemplate shape;
  shape.name = "s";
  shape.vcpus = 1;
  shape.memory_bytes = 3ULL << 20;
  shape.hugepage_size_bytes = 2ULL << 20;
  shape.gpus.count = 2;
  CHECK(summarize_template(shape) == "s, 1 vCPU, 3MiB in 2M pages, 2 GPUs (any NVIDIA)");
  shape.gpus.ids = {{0x1002, 0x74a1}};
  shape.nics.count = 1;
  CHECK(summarize_template(shape) == "s, 1 vCPU, 3MiB in 2M pages, 2 GPUs (1002:74a1), 1 front-end VF");
}

}  // namespace
}  // namespace hostagent::ctl
