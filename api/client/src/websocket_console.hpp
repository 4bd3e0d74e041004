// api/client websocket_console (private): a WebSocket joined to a terminal, on the client's own
// io_context, one thread: the server's messages are written to the output descriptor as they come;
// what the input descriptor gives is sent, a message at a time, the next read of the input waiting
// for the write before it (so a server that reads slowly slows the typing, and holds no more).
#pragma once

#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <string>

#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/stream_traits.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>

#include "transport.hpp"

namespace hostagent::api::detail {

namespace websocket = boost::beast::websocket;

template <class Stream>
class ConsolePump {
 public:
  ConsolePump(boost::asio::io_context& io, websocket::stream<Stream&>& ws, const ConsoleIo& terminal)
      : ws_(ws), terminal_(terminal), input_(io) {}

  // Runs until the session ends; the outcome, or the error that ended it.
  Result<WebSocketOutcome> run(boost::asio::io_context& io, const std::string& what) {
    const int input = ::dup(terminal_.input_fd);
    error_code assigned;
    if (input >= 0) input_.assign(input, assigned);
    if (input < 0 || assigned) {
      if (input >= 0) ::close(input);
      return Error{ErrorCode::invalid_argument,
                   what + ": the console's input must be a terminal or a pipe (epoll takes no regular file)"};
    }
    read_server();
    read_input();
    io.restart();
    io.run();
    if (failure_) return Error{ErrorCode::unavailable, what + ": the connection broke (" + failure_.message() + ")"};
    if (output_failed_)
      return Error{ErrorCode::io_error, what + ": cannot write the console's output: " + failure_text_};
    return outcome_;
  }

 private:
  using error_code = boost::system::error_code;

  void read_server() {
    ws_.async_read(incoming_, [this](const error_code& error, std::size_t) {
      if (error == websocket::error::closed) {
        outcome_.close_reason = std::string(ws_.reason().reason.c_str());
        return stop_input();
      }
      if (error) {
        if (!leaving_) failure_ = error;
        return stop_input();
      }
      const auto data = incoming_.data();
      if (!write_all(static_cast<const char*>(data.data()), data.size())) return leave();
      incoming_.consume(data.size());
      read_server();
    });
  }

  void read_input() {
    input_.async_read_some(boost::asio::buffer(chunk_), [this](const error_code& error, std::size_t got) {
      if (error) return leave();  // end of input, or input_ closed
      const std::string_view read(chunk_.data(), got);
      const std::size_t escape = read.find(terminal_.escape);
      pending_ = std::string(read.substr(0, escape));
      const bool last = escape != std::string_view::npos;
      if (pending_.empty()) return last ? leave() : read_input();
      ws_.async_write(boost::asio::buffer(pending_), [this, last](const error_code& write_error, std::size_t) {
        if (write_error) return leave();  // the read of the server's side says why
        if (last) return leave();
        read_input();
      });
    });
  }

  // The client leaves: the close handshake, whose answer ends the pending read of the server.
  void leave() {
    if (leaving_) return;
    leaving_ = true;
    stop_input();
    if (!ws_.is_open()) return;
    ws_.async_close(websocket::close_reason(websocket::close_code::normal, "the client left"),
                    [](const error_code&) {});
  }

  void stop_input() {
    error_code ignored;
    input_.close(ignored);
  }

  bool write_all(const char* data, std::size_t size) {
    while (size > 0) {
      const ssize_t wrote = ::write(terminal_.output_fd, data, size);
      if (wrote < 0 && errno == EINTR) continue;
      if (wrote <= 0) {
        output_failed_ = true;
        failure_text_ = wrote < 0 ? std::string(std::strerror(errno)) : "nothing was written";
        return false;
      }
      data += wrote;
      size -= static_cast<std::size_t>(wrote);
    }
    return true;
  }

  websocket::stream<Stream&>& ws_;
  const ConsoleIo terminal_;
  boost::asio::posix::stream_descriptor input_;
  boost::beast::flat_buffer incoming_;
  std::array<char, 4096> chunk_{};
  std::string pending_;  // being written to the server
  bool leaving_ = false;
  bool output_failed_ = false;
  std::string failure_text_;
  error_code failure_;
  WebSocketOutcome outcome_;
};

// The handshake, then the pump. `run_one` is transport.cpp's: one asynchronous operation run to its
// end on the client's io_context.
template <class Stream, class RunOne>
Result<WebSocketOutcome> run_console(boost::asio::io_context& io, Stream& stream, const WebSocketRequest& request,
                                     const std::string& what, RunOne run_one) {
  websocket::stream<Stream&> ws(stream);
  ws.set_option(websocket::stream_base::decorator([&request](websocket::request_type& message) {
    for (const auto& [name, value] : request.headers) message.set(name, value);
  }));
  websocket::response_type answer;
  boost::beast::get_lowest_layer(stream).expires_after(request.handshake_timeout);
  const auto error =
      run_one([&](auto handler) { ws.async_handshake(answer, request.host, request.target, std::move(handler)); });
  if (error) {
    if (answer.result_int() != 0 && answer.result_int() != 101) {
      return WebSocketOutcome{answer.result_int(), answer.body(), ""};
    }
    return Error{ErrorCode::unavailable, what + ": the WebSocket handshake failed (" + error.message() + ")"};
  }
  boost::beast::get_lowest_layer(stream).expires_never();  // the session lasts as long as its user
  ws.binary(true);
  ConsolePump<Stream> pump(io, ws, request.io);
  return pump.run(io, what);
}

}  // namespace hostagent::api::detail
