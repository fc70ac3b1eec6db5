// ServeProcess: `replayssm serve` run as a child process on a free port,
// for tests that talk to it over HTTP as any client would.
#pragma once

#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "test_util.h"

namespace replayssm::test {

class ServeProcess {
 public:
  // Starts `replayssm serve --port 0 ARGS...` and waits until /health says
  // ready (or the process dies: ok() is false, log() says why).
  explicit ServeProcess(std::vector<std::string> args) {
    int err[2];
    if (pipe(err) != 0) return;
    const std::string cli = test::cli_path();  // before the fork: no allocation after it
    std::vector<std::string> argv = {cli, "serve", "--port", "0"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> c;
    for (std::string& a : argv) c.push_back(a.data());
    c.push_back(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      dup2(err[1], 2);
      close(err[0]);
      close(err[1]);
      execv(cli.c_str(), c.data());
      _exit(127);
    }
    close(err[1]);
    err_ = fdopen(err[0], "r");
    // The port from the first line ("serve: listening on HOST:PORT ...").
    char line[4096];
    while (port_ == 0 && std::fgets(line, sizeof line, err_) != nullptr) {
      log_ += line;
      std::smatch m;
      const std::string s = line;
      if (std::regex_search(s, m, std::regex(R"(listening on [^:]+:(\d+))"))) port_ = std::stoi(m[1]);
    }
    reader_ = std::thread([this] {
      char l[4096];
      while (std::fgets(l, sizeof l, err_) != nullptr) {
        std::lock_guard<std::mutex> lock(mu_);
        log_ += l;
      }
    });
    if (port_ == 0) return;
    for (int i = 0; i < 600; ++i) {  // the model loads: up to a minute
      httplib::Client c("127.0.0.1", port_);
      auto r = c.Get("/health");
      if (r && r->status == 200) {
        ready_ = true;
        return;
      }
      if (exited()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ServeProcess() {
    if (pid_ > 0 && status_ < 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (reader_.joinable()) reader_.join();
    if (err_) fclose(err_);
  }
  bool ok() const { return ready_; }
  int port() const { return port_; }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(120, 0);
    return c;
  }
  std::string log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  // SIGTERM, then the exit status (waits up to `seconds`; -1 if it did not exit).
  int terminate(int seconds = 60) {
    kill(pid_, SIGTERM);
    for (int i = 0; i < seconds * 20 && status_ < 0; ++i) {
      if (exited()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return status_ >= 0 && WIFEXITED(status_) ? WEXITSTATUS(status_) : -1;
  }

 private:
  bool exited() {
    if (status_ >= 0) return true;
    int st = 0;
    if (waitpid(pid_, &st, WNOHANG) == pid_) status_ = st;
    return status_ >= 0;
  }
  pid_t pid_ = -1;
  int port_ = 0;
  int status_ = -1;
  bool ready_ = false;
  FILE* err_ = nullptr;
  std::thread reader_;
  std::mutex mu_;
  std::string log_;
};

}  // namespace replayssm::test
