// parallel_for (see parallel.h): a fixed pool woken per call.
#include "core/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace replayssm {

namespace {

class Pool {
 public:
  Pool() {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    for (unsigned i = 1; i < hw; ++i) workers_.emplace_back([this, i] { loop(static_cast<int>(i)); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      ++generation_;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }
  int threads() const { return static_cast<int>(workers_.size()) + 1; }

  void run(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
    const int t = std::min<int64_t>(threads(), n) > 0 ? static_cast<int>(std::min<int64_t>(threads(), n)) : 0;
    if (t <= 1) {
      if (n > 0) fn(0, n);
      return;
    }
    std::unique_lock<std::mutex> call(call_mu_);  // one call at a time
    {
      std::lock_guard<std::mutex> lock(mu_);
      fn_ = &fn;
      n_ = n;
      parts_ = t;
      pending_ = t - 1;
      ++generation_;
    }
    wake_.notify_all();
    fn(0, range(0, n, t).second);
    std::unique_lock<std::mutex> lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    fn_ = nullptr;
  }

 private:
  static std::pair<int64_t, int64_t> range(int part, int64_t n, int parts) {
    return {n * part / parts, n * (part + 1) / parts};
  }
  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(int64_t, int64_t)>* fn = nullptr;
      int64_t n = 0;
      int parts = 0;
      {
        std::unique_lock<std::mutex> lock(mu_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) return;
        if (id >= parts_) continue;  // fewer parts than threads this call
        fn = fn_;
        n = n_;
        parts = parts_;
      }
      const auto [b, e] = range(id, n, parts);
      (*fn)(b, e);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (--pending_ == 0) done_.notify_one();
      }
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, call_mu_;
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* fn_ = nullptr;
  int64_t n_ = 0;
  int parts_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

Pool& pool() {
  static Pool p;
  return p;
}

}  // namespace

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) { pool().run(n, fn); }

int parallel_threads() { return pool().threads(); }

}  // namespace replayssm
