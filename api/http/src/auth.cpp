// api/http auth: identities and the reader/operator rule.
#include "auth.hpp"

#include <strings.h>
#include <sys/socket.h>

#include <algorithm>

#include <openssl/x509.h>

#include "hostagent/api/problem.hpp"

namespace hostagent::api::detail {

bool constant_time_equal(std::string_view a, std::string_view b) {
  const std::size_t length = std::max(a.size(), b.size());
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < length; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    difference |= static_cast<unsigned char>(x ^ y);
  }
  return difference == 0;
}

std::optional<Identity> identity_from_token(const HttpRequest& request, const ServerOptions& options) {
  const auto header = request.headers.find("authorization");
  if (header == request.headers.end()) return std::nullopt;
  const std::string_view value = header->second;
  constexpr std::string_view kScheme = "bearer ";  // RFC 6750 2.1; the scheme is case-insensitive
  if (value.size() <= kScheme.size() || ::strncasecmp(value.data(), kScheme.data(), kScheme.size()) != 0) {
    return std::nullopt;
  }
  std::string_view token = value.substr(kScheme.size());
  while (!token.empty() && token.front() == ' ') token.remove_prefix(1);
  // Both compared, always: which token matched must not show in the time taken either.
  const bool is_operator = !options.operator_token.empty() && constant_time_equal(token, options.operator_token);
  const bool is_reader = !options.reader_token.empty() && constant_time_equal(token, options.reader_token);
  if (is_operator) return Identity{"token:operator", Role::operator_role};
  if (is_reader) return Identity{"token:reader", Role::reader};
  return std::nullopt;
}

std::optional<std::string> peer_common_name(SSL* ssl) {
  X509* certificate = SSL_get1_peer_certificate(ssl);
  if (certificate == nullptr) return std::nullopt;
  std::optional<std::string> out;
  X509_NAME* subject = X509_get_subject_name(certificate);
  const int index = subject == nullptr ? -1 : X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index >= 0) {
    const ASN1_STRING* data = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
    unsigned char* utf8 = nullptr;
    const int length = ASN1_STRING_to_UTF8(&utf8, data);
    if (length >= 0) out = std::string(reinterpret_cast<const char*>(utf8), static_cast<std::size_t>(length));
    OPENSSL_free(utf8);
  }
  X509_free(certificate);
  return out;
}

Identity identity_from_certificate(const std::string& common_name, const ServerOptions& options) {
  const auto& operators = options.operator_common_names;
  const bool is_operator = std::find(operators.begin(), operators.end(), common_name) != operators.end();
  return Identity{"cert:CN=" + common_name, is_operator ? Role::operator_role : Role::reader};
}

std::optional<Identity> identity_from_peer_credentials(int fd) {
  ucred credentials{};
  socklen_t size = sizeof(credentials);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &size) != 0) return std::nullopt;
  return Identity{"uid:" + std::to_string(credentials.uid), Role::operator_role};
}

std::optional<HttpResponse> authorization_problem(const HttpRequest& request, const std::optional<Identity>& identity) {
  if (!identity) {
    return problem(401, "unauthenticated",
                   "this listener needs a bearer token (Authorization: Bearer TOKEN) or a TLS client certificate",
                   request.path);
  }
  if (identity->role == Role::reader && !is_read_method(request.method)) {
    return problem(403, "forbidden",
                   identity->principal + " is a reader: it may only read (GET); " + request.method +
                       " needs an operator (api.operator_common_names or the operator token)",
                   request.path);
  }
  return std::nullopt;
}

}  // namespace hostagent::api::detail
