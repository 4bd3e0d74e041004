// The audit log's parts on their own: the line (valid JSON of valid UTF-8 whatever the request
// held), what a command names, and reopening after a rotation by rename.
#include <doctest/doctest.h>

#include <boost/json/parse.hpp>
#include <filesystem>

#include "audit_log.hpp"
#include "test_support.hpp"

namespace hostagent::api::detail {
namespace {

namespace fs = std::filesystem;
using hostagent::testing::read_text_file;
using hostagent::testing::TempDir;

HttpRequest change(const std::string& principal, const std::string& target) {
  HttpRequest request;
  request.method = "POST";
  request.target = target;
  request.identity = Identity{principal, Role::operator_role};
  request.remote = "unix";
  return request;
}

TEST_CASE("audit_line: valid JSON and UTF-8 even when the principal and target hold other bytes") {
  // A client certificate's CN is the CA's to choose: any bytes.
  const HttpRequest request = change("cert:CN=ctl\xff\xfe\"x\"", "/v1/vms/a\xc3");
  const std::string line = audit_line({"2026-12-02T00:00:00Z", &request, 404, {"a", "", "", ""}, ""});
  REQUIRE(line.back() == '\n');
  CHECK(line.find('\n') == line.size() - 1);
  boost::system::error_code error;
  const auto parsed = boost::json::parse(line, error);  // refuses invalid UTF-8
  REQUIRE_MESSAGE(!error, line);
  const auto& entry = parsed.as_object();
  CHECK(entry.at("principal").as_string() == "cert:CN=ctl\\xff\\xfe\"x\"");
  CHECK(entry.at("target").as_string() == "/v1/vms/a\\xc3");
  CHECK(entry.at("vm").as_string() == "a");
  CHECK(entry.at("template").is_null());
  CHECK(entry.at("request_id").is_null());
  CHECK(entry.at("device").is_null());
  CHECK(entry.at("operation").is_null());
  CHECK(entry.at("status").as_int64() == 404);
}

TEST_CASE("audit_subject: a create names its VM, template and request id, a VM's verbs its name") {
  const auto create = audit_subject(command::CreateVm{service::CreateVmRequest{
      .name = VmName("c-1"), .template_name = TemplateName("gx3-16x128x1h100"), .request_id = "r-1"}});
  CHECK(create.vm == "c-1");
  CHECK(create.template_name == "gx3-16x128x1h100");
  CHECK(create.request_id == "r-1");
  CHECK(audit_subject(command::DeleteVm{VmName("d-1")}).vm == "d-1");
  CHECK(audit_subject(command::StopVm{VmName("s-1"), true}).vm == "s-1");
  CHECK(audit_subject(command::ValidateTemplate{"name: x"}).vm.empty());
}

TEST_CASE("AuditLog::reopen: after a rename the next lines go to a new file at the path") {
  TempDir dir;
  const fs::path path = dir.path() / "audit.log";
  auto log = AuditLog::open(path);
  REQUIRE(log.ok());
  (*log)->write("{\"n\":1}\n");
  fs::rename(path, dir.path() / "audit.log.1");
  (*log)->write("{\"n\":2}\n");  // before the reopen: still the renamed file, nothing lost
  REQUIRE((*log)->reopen().ok());
  (*log)->write("{\"n\":3}\n");
  CHECK(read_text_file(dir.path() / "audit.log.1") == "{\"n\":1}\n{\"n\":2}\n");
  CHECK(read_text_file(path) == "{\"n\":3}\n");
}

TEST_CASE("AuditLog::reopen: when the path cannot be opened the old file stays in use, and the error names it") {
  TempDir dir;
  const fs::path path = dir.path() / "logs" / "audit.log";
  fs::create_directories(path.parent_path());
  auto log = AuditLog::open(path);
  REQUIRE(log.ok());
  fs::rename(path.parent_path(), dir.path() / "moved");
  const auto reopened = (*log)->reopen();
  REQUIRE_FALSE(reopened.ok());
  CHECK(reopened.error().message.find(path.string()) != std::string::npos);
  (*log)->write("{\"n\":1}\n");
  CHECK(read_text_file(dir.path() / "moved" / "audit.log") == "{\"n\":1}\n");
}

}  // namespace
}  // namespace hostagent::api::detail
