// api/http auth: who a client is (TLS client certificate, bearer token, unix peer credentials) and
// what it may do (reader: GET and HEAD; operator: everything).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <openssl/ssl.h>

#include "hostagent/api/http_server.hpp"

namespace hostagent::api::detail {

// Compares in time that depends on the lengths only, so a wrong token teaches nothing by timing.
bool constant_time_equal(std::string_view a, std::string_view b);

// "Authorization: Bearer T" against the configured tokens; nullopt when absent or wrong.
std::optional<Identity> identity_from_token(const HttpRequest& request, const ServerOptions& options);

// The verified client certificate's subject CN; nullopt without one.
std::optional<std::string> peer_common_name(SSL* ssl);
Identity identity_from_certificate(const std::string& common_name, const ServerOptions& options);

// "uid:N" from SO_PEERCRED (unix(7)): the kernel's record of the connecting process.
std::optional<Identity> identity_from_peer_credentials(int fd);

// 401 (nobody) or 403 (a reader asking for a change), or nullopt when the request may run.
std::optional<HttpResponse> authorization_problem(const HttpRequest& request, const std::optional<Identity>& identity);

}  // namespace hostagent::api::detail
