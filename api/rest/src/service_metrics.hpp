// api/rest, private: /v1/metrics. What the service knows (VMs, free capacity, libvirt, device
// health) is read at each scrape; what only passes by (ended operations, HTTP requests) is counted
// here as it happens.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "hostagent/api/http_server.hpp"
#include "hostagent/service/vm_service.hpp"
#include "metrics_text.hpp"

namespace hostagent::api::detail {

class ServiceMetrics {
 public:
  ServiceMetrics();
  // An operation event: an operation that ended (once per id) is observed in the duration histogram,
  // and a create's or start's phases, when it succeeded, in the phase histogram.
  // A cleaning event that ended (once per record sequence): its outcome counted, each step that ran
  // observed in the step histogram.
  void on_event(const service::ServiceEvent& event);
  void on_request(const std::string& method, unsigned status, std::chrono::nanoseconds latency);
  // The HTTP server's connection budget, read at each scrape from now on.
  void watch_connections(std::function<ConnectionStats()> read);
  // The exposition text, computed after the call began; reads the service (may block on libvirt).
  std::string render(service::VmService& service);

 private:
  std::string compute(service::VmService& service);
  void on_cleaned(const service::CleaningRecordView& record);
  const std::string& capacity_text(const service::HostUsage& usage);
  const std::string& health_text(const Result<service::DeviceHealthReading>& health);
  void render_counted(MetricsText& out);
  void render_observed_locked(MetricsText& out) const;  // the histograms and counts of what ended

  // Sections compute() reuses while their source is unchanged; only the one computation running
  // touches them (render() runs one at a time).
  struct CapacitySection {
    const numa::HostModel* host = nullptr;
    uint64_t version = 0;  // HostUsage::version
    // What the kernel's pools had free: it changes with no change of version (a process on hugetlbfs).
    std::map<std::pair<int, uint64_t>, uint64_t> unclaimed;
    std::string text;
  };
  std::optional<CapacitySection> capacity_;
  service::DeviceHealthReading health_reading_;  // the one health_text_ shows; held, so its address is not reused
  std::string health_text_;
  const std::string empty_;

  std::mutex scrape_mutex_;
  std::condition_variable scrape_done_;
  bool scrape_running_ = false;
  uint64_t scrapes_started_ = 0;
  uint64_t scrapes_finished_ = 0;
  std::string scrape_text_;    // the last finished scrape's
  std::size_t last_size_ = 0;  // of the last scrape's text: compute() reserves it (one scrape at a time)

  std::mutex mutex_;
  std::map<std::pair<std::string, std::string>, Histogram> operation_durations_;  // (kind, result)
  // Operations already observed, by id: how many of their phases (the guest's come after the end).
  std::map<std::string, std::size_t> ended_;
  std::deque<std::string> ended_order_;                                      // oldest first, to forget them
  std::map<std::pair<std::string, unsigned>, uint64_t> requests_;            // (method, status)
  std::map<std::pair<std::string, std::string>, Histogram> cleaning_steps_;  // (step, role)
  std::map<std::array<std::string, 3>, Histogram> start_phases_;             // (kind, phase, template)
  std::map<std::string, uint64_t> cleanings_;                                // by outcome
  Histogram release_cleanings_;         // each VM's release: its devices' cleaning, wall time
  std::set<uint64_t> cleaned_;          // record sequences observed
  std::deque<uint64_t> cleaned_order_;  // oldest first, to forget them
  Histogram request_durations_;
  std::function<ConnectionStats()> connections_;  // unset until the server runs
  // Moves with each observation of what ended (operations, phases, cleanings, releases); the text
  // render_observed_locked() last wrote, and the version it was written at.
  uint64_t observed_version_ = 1;
  uint64_t observed_text_version_ = 0;
  std::string observed_text_;
};

}  // namespace hostagent::api::detail
