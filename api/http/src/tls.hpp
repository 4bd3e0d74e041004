// api/http tls: the TCP listeners' TLS context (TLS 1.2 and later; client certificates verified
// against api.tls.client_ca when it is set).
#pragma once

#include <memory>

#include <boost/asio/ssl/context.hpp>

#include "hostagent/api/http_server.hpp"

namespace hostagent::api::detail {

bool tls_enabled(const ServerOptions& options);

// invalid_argument naming the file that cannot be loaded (missing, unreadable, not PEM, key and
// certificate that do not match).
Result<std::shared_ptr<boost::asio::ssl::context>> make_tls_context(const ServerOptions& options);

}  // namespace hostagent::api::detail
