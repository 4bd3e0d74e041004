// Test certificates for the TLS suites, made with the openssl binary: a CA, the server's leaf, an
// operator's and a reader's client certificate, and one signed by another CA.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace hostagent::api::testing {

struct Pki {
  std::filesystem::path ca, server_certificate, server_key;
  std::filesystem::path operator_certificate, operator_key, reader_certificate, reader_key;
  std::filesystem::path foreign_certificate, foreign_key;  // CN=control-plane, signed by another CA
};

inline bool openssl(const std::vector<std::string>& arguments) {
  std::vector<std::string> argv = {"openssl"};
  argv.insert(argv.end(), arguments.begin(), arguments.end());
  const auto result = hostagent::testing::run_command(argv);
  if (result.exit_code != 0) MESSAGE("openssl failed: " << result.output);
  return result.exit_code == 0;
}

inline bool make_ca(const std::filesystem::path& dir, const std::string& name) {
  return openssl({"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                  (dir / (name + ".key")).string(), "-out", (dir / (name + ".crt")).string(), "-subj", "/CN=" + name,
                  "-days", "2"});
}

inline bool make_leaf(const std::filesystem::path& dir, const std::string& file, const std::string& common_name,
                      const std::string& ca, int serial) {
  const std::string base = (dir / file).string();
  return openssl({"req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout",
                  base + ".key", "-out", base + ".csr", "-subj", "/CN=" + common_name}) &&
         openssl({"x509", "-req", "-in", base + ".csr", "-CA", (dir / (ca + ".crt")).string(), "-CAkey",
                  (dir / (ca + ".key")).string(), "-set_serial", std::to_string(serial), "-out", base + ".crt", "-days",
                  "2"});
}

inline std::optional<Pki> make_pki(const std::filesystem::path& dir) {
  if (!hostagent::testing::find_program("openssl")) {
    hostagent::testing::skip("the openssl binary is not installed (it makes the test certificates)");
    return std::nullopt;
  }
  const bool made = make_ca(dir, "ca") && make_ca(dir, "other-ca") && make_leaf(dir, "server", "localhost", "ca", 1) &&
                    make_leaf(dir, "operator", "control-plane", "ca", 2) &&
                    make_leaf(dir, "reader", "dashboard", "ca", 3) &&
                    make_leaf(dir, "foreign", "control-plane", "other-ca", 4);
  REQUIRE(made);
  return Pki{dir / "ca.crt",     dir / "server.crt", dir / "server.key",  dir / "operator.crt", dir / "operator.key",
             dir / "reader.crt", dir / "reader.key", dir / "foreign.crt", dir / "foreign.key"};
}

}  // namespace hostagent::api::testing
