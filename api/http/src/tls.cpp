// api/http tls: building the server's TLS context.
#include "tls.hpp"

#include <openssl/ssl.h>

namespace hostagent::api::detail {
namespace {

namespace ssl = boost::asio::ssl;

Error file_error(const std::string& field, const std::string& file, const boost::system::error_code& error) {
  return Error{ErrorCode::invalid_argument,
               field + " " + file + ": cannot be loaded (" + error.message() + "); it must be a readable PEM file"};
}

}  // namespace

bool tls_enabled(const ServerOptions& options) {
  return !options.tls_certificate_file.empty() || !options.tls_key_file.empty() || !options.tls_client_ca_file.empty();
}

Result<std::shared_ptr<ssl::context>> make_tls_context(const ServerOptions& options) {
  if (options.tls_certificate_file.empty() || options.tls_key_file.empty()) {
    return Error{ErrorCode::invalid_argument, "api.tls needs both certificate and key (got certificate '" +
                                                  options.tls_certificate_file + "', key '" + options.tls_key_file +
                                                  "')"};
  }
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use);
  SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  boost::system::error_code error;
  if (context->use_certificate_chain_file(options.tls_certificate_file, error)) {
    return file_error("api.tls.certificate", options.tls_certificate_file, error);
  }
  if (context->use_private_key_file(options.tls_key_file, ssl::context::pem, error)) {
    return file_error("api.tls.key", options.tls_key_file, error);
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return Error{
        ErrorCode::invalid_argument,
        "api.tls.key " + options.tls_key_file + " does not match api.tls.certificate " + options.tls_certificate_file};
  }
  if (!options.tls_client_ca_file.empty()) {
    if (context->load_verify_file(options.tls_client_ca_file, error)) {
      return file_error("api.tls.client_ca", options.tls_client_ca_file, error);
    }
    context->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert, error);
    // With client verification, OpenSSL refuses to resume a session that has no id context
    // (SSL_CTX_set_session_id_context(3)); any fixed value scopes sessions to this server.
    static const unsigned char kContext[] = "hostagent-api";
    SSL_CTX_set_session_id_context(context->native_handle(), kContext, sizeof(kContext) - 1);
  }
  return context;
}

}  // namespace hostagent::api::detail
