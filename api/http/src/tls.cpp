// api/http tls: building the server's TLS context.
#include "tls.hpp"

#include <openssl/ssl.h>

#include "hostagent/common/text_file.hpp"

namespace hostagent::api::detail {
namespace {

namespace ssl = boost::asio::ssl;

Error file_error(const std::string& field, const std::string& file, const boost::system::error_code& error) {
  return Error{ErrorCode::invalid_argument,
               field + " " + file + ": cannot be loaded (" + error.message() + "); it must be a readable PEM file"};
}

// The PEM text of a certificate or key file, read as every file an operator names is read
// (common/named_file): OpenSSL's own *_file calls would open a FIFO and wait on it forever.
Result<std::string> pem_text(const std::string& field, const std::string& file) {
  auto text = read_text_file(file);
  if (!text.ok()) return Error{ErrorCode::invalid_argument, field + " " + file + ": " + text.error().message};
  return text;
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
  HA_TRY(const auto certificate, pem_text("api.tls.certificate", options.tls_certificate_file));
  if (context->use_certificate_chain(boost::asio::buffer(certificate), error)) {
    return file_error("api.tls.certificate", options.tls_certificate_file, error);
  }
  HA_TRY(const auto key, pem_text("api.tls.key", options.tls_key_file));
  if (context->use_private_key(boost::asio::buffer(key), ssl::context::pem, error)) {
    return file_error("api.tls.key", options.tls_key_file, error);
  }
  if (SSL_CTX_check_private_key(context->native_handle()) != 1) {
    return Error{
        ErrorCode::invalid_argument,
        "api.tls.key " + options.tls_key_file + " does not match api.tls.certificate " + options.tls_certificate_file};
  }
  if (!options.tls_client_ca_file.empty()) {
    HA_TRY(const auto authorities, pem_text("api.tls.client_ca", options.tls_client_ca_file));
    if (context->add_certificate_authority(boost::asio::buffer(authorities), error)) {
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
