// Real processes on 127.0.0.1: bamboo-manager and bamboo-worker, killed with real
// signals. Every process is killed and reaped by the test that started it.
#include <catch2/catch.hpp>

#include "tests/examples/child_process.hpp"
#include "tests/run_command.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

namespace {

using namespace bamboo::test;

struct cluster {
  scratch_dir dir;
  child manager;
  std::string port;
  explicit cluster(int heartbeat_ms = 100, int misses = 3)
      : manager(dir, "manager",
                {BAMBOO_MANAGER_BIN, "--heartbeat-ms", std::to_string(heartbeat_ms),
                 "--heartbeat-misses", std::to_string(misses)},
                "a-test-cluster-token-0123456789") {
    port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))");
    REQUIRE_FALSE(port.empty());
  }
  child worker(const std::string& name,
               const std::string& token = "a-test-cluster-token-0123456789") {
    return child(
        dir, name,
        {BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port, "--heartbeat-ms", "100"},
        token);
  }
};

} // namespace

TEST_CASE(
    "a worker with the token joins, and its kill -9 is noticed in well under a second",
    "[examples]") {
  no_leftovers guard;
  cluster c;
  auto w = c.worker("w0");
  REQUIRE(w.wait_for(R"(joined as node (\d+))") == "0");
  REQUIRE_FALSE(c.manager.wait_for(R"(node 0 joined)").empty());
  const auto killed = clock_type::now();
  kill(w.pid(), SIGKILL);
  REQUIRE_FALSE(c.manager.wait_for(R"(node 0 lost: connection lost)", 5s).empty());
  const auto noticed = clock_type::now() - killed;
  INFO("noticed after " << std::chrono::duration<double>(noticed).count() << " s");
  CHECK(noticed < 1s);
  CHECK(w.wait_exit() == 128 + SIGKILL);
}

TEST_CASE("a worker with the wrong token is refused at the door - exit 2 - and never "
          "reaches CAF or the gateway",
          "[examples]") {
  no_leftovers guard;
  cluster c;
  auto w = c.worker("wrong", "not-the-cluster-token-at-all");
  CHECK(w.wait_exit() == 2);
  INFO(w.log());
  CHECK(w.log().find("refused this process's proof of the cluster token (a wrong "
                     "token") != std::string::npos);
  CHECK(c.manager.log().find("a wrong proof of the cluster token") != std::string::npos);
  CHECK(c.manager.log().find("joined") == std::string::npos);
}

TEST_CASE(
    "a token file that group or others can read, and a token shorter than 16 "
    "bytes, are refused with one line, and a CRLF line end is not part of the token",
    "[examples]") {
  no_leftovers guard;
  cluster c;
  const std::string token = "a-test-cluster-token-0123456789";
  auto write = [&](const std::string& name, const std::string& text, mode_t mode) {
    const auto path = c.dir.file(name);
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
    return path;
  };
  auto worker = [&](const std::string& name, std::vector<std::string> extra,
                    const std::string& env_token) {
    std::vector<std::string> args{BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + c.port,
                                  "--heartbeat-ms", "100"};
    args.insert(args.end(), extra.begin(), extra.end());
    return child(c.dir, name, args, env_token);
  };
  const auto open = write("open_token", token + "\n", 0644);
  auto w1 = worker("open", {"--token-file", open}, "");
  CHECK(w1.wait_exit() == 2);
  CHECK(w1.log() == "bamboo-worker: error: token file '" + open +
                        "' has mode 644: group and others must not have access (chmod "
                        "600 " +
                        open + ")\n");
  auto w2 = worker("short", {}, "short-token");
  CHECK(w2.wait_exit() == 2);
  CHECK(w2.log() ==
        "bamboo-worker: error: the cluster token has 11 bytes: at least 16 are needed\n");
  const auto crlf = write("crlf_token", token + "\r\n", 0600);
  auto w3 = worker("crlf", {"--token-file", crlf}, "");
  CHECK(w3.wait_for(R"(joined as node (\d+))") == "0");
  w3.signal(SIGINT);
  CHECK(w3.wait_exit() == 0);
}

TEST_CASE("a stopped worker is declared lost within period x misses + a tick + 1 s, "
          "fenced, and comes back as a new node",
          "[examples]") {
  no_leftovers guard;
  cluster c(100, 3);
  auto w = c.worker("stopped");
  REQUIRE(w.wait_for(R"(joined as node (\d+))") == "0");
  const auto stopped = clock_type::now();
  kill(w.pid(), SIGSTOP);
  REQUIRE_FALSE(c.manager.wait_for(R"(node 0 lost: missed heartbeats)", 5s).empty());
  const auto declared = clock_type::now() - stopped;
  INFO("declared lost after " << std::chrono::duration<double>(declared).count() << " s");
  // period x misses + one period, with room for a loaded machine.
  CHECK(declared < 100ms * 3 + 100ms + 1s); // period x misses + a tick + 1 s of slack
  kill(w.pid(), SIGCONT);
  CHECK_FALSE(c.manager.wait_for(R"(dropped a heartbeat from fenced node 0)").empty());
  CHECK(w.wait_for(R"(joined again as node (\d+))") == "1");
  CHECK_FALSE(c.manager.wait_for(R"(node 1 joined)").empty());
  kill(w.pid(), SIGTERM); // a preemption notice: the worker says so and leaves
  CHECK(w.wait_exit() == 0);
  CHECK_FALSE(c.manager.wait_for(R"(node 1 has a preemption notice)").empty());
}

TEST_CASE("random and truncated bytes at the manager's port do not hurt it",
          "[examples]") {
  no_leftovers guard;
  cluster c;
  std::mt19937 gen(7);
  for (int n : {0, 1, 7, 64, 4096, 100000}) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(std::stoi(c.port)));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    std::vector<char> junk(n);
    for (auto& b : junk)
      b = static_cast<char>(gen());
    if (n > 0)
      CHECK(send(fd, junk.data(), junk.size(), MSG_NOSIGNAL) >= 0);
    close(fd);
  }
  std::this_thread::sleep_for(200ms);
  CHECK(c.manager.running()); // not ended (a zombie would count as ended)
  auto w = c.worker("after_junk");
  CHECK(w.wait_for(R"(joined as node (\d+))") == "0");
}

TEST_CASE("with TLS the workers whose certificates the manager's CA signed train, and a "
          "worker without TLS or with a certificate of another CA is refused without "
          "disturbing them",
          "[examples]") {
  no_leftovers guard;
  scratch_dir dir;
  // Two CAs made with the openssl command, and a certificate signed by each.
  auto sh = [&](const std::string& cmd) {
    auto r = bamboo::test::run_command("cd " + dir.path() + " && " + cmd);
    INFO(r.output);
    REQUIRE(r.status == 0);
  };
  for (const std::string ca : {"ca", "other"}) {
    sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout " + ca + ".key -out " + ca +
       ".pem -days 1 -subj /CN=bamboo-test-" + ca);
    sh("openssl req -newkey rsa:2048 -nodes -keyout " + ca + "-node.key -out " + ca +
       "-node.csr -subj /CN=localhost");
    sh("openssl x509 -req -in " + ca + "-node.csr -CA " + ca + ".pem -CAkey " + ca +
       ".key -CAcreateserial -out " + ca + "-node.pem -days 1");
  }
  auto tls = [&](const std::string& ca) {
    return std::vector<std::string>{"--tls-cert", dir.file(ca + "-node.pem"),
                                    "--tls-key",  dir.file(ca + "-node.key"),
                                    "--tls-ca",   dir.file(ca + ".pem")};
  };
  const std::string token = "a-test-cluster-token-0123456789";
  std::vector<std::string> margs{BAMBOO_MANAGER_BIN,
                                 "--heartbeat-ms",
                                 "100",
                                 "--stages",
                                 "2",
                                 "--layers",
                                 "2",
                                 "--d-model",
                                 "32",
                                 "--heads",
                                 "2",
                                 "--seq-len",
                                 "16",
                                 "--steps",
                                 "20",
                                 "--quiet"};
  for (auto& a : tls("ca"))
    margs.push_back(a);
  child manager(dir, "manager", margs, token);
  const auto port = manager.wait_for(R"(listening on 127\.0\.0\.1:(\d+))");
  REQUIRE_FALSE(port.empty());
  auto worker = [&](const std::string& name, std::vector<std::string> extra) {
    std::vector<std::string> args{BAMBOO_WORKER_BIN, "--manager", "127.0.0.1:" + port,
                                  "--connect-timeout-s", "5"};
    args.insert(args.end(), extra.begin(), extra.end());
    return child(dir, name, args, token);
  };
  auto first = worker("first", tls("ca"));
  REQUIRE(first.wait_for(R"(joined as node (\d+))") == "0");
  for (const auto& [name, extra] :
       {std::pair<std::string, std::vector<std::string>>{"plain", {}},
        {"stranger", tls("other")},
        // Trusts the manager's CA, holds a certificate of another.
        {"foreign",
         {"--tls-cert", dir.file("other-node.pem"), "--tls-key",
          dir.file("other-node.key"), "--tls-ca", dir.file("ca.pem")}}}) {
    auto w = worker(name, extra);
    const int status = w.wait_exit(15s);
    INFO(name << ": " << w.log());
    CHECK(status == 1);
    CHECK(w.log().find("cannot reach the manager") != std::string::npos);
  }
  auto second = worker("second", tls("ca"));
  CHECK(second.wait_for(R"(joined as node (\d+))") == "1");
  const int status = manager.wait_exit(60s);
  INFO(manager.log());
  CHECK(status == 0);
  CHECK(manager.log().find("node 0 lost") == std::string::npos);
  // The refusals, once for their address.
  const auto said = manager.log().find("refused a TLS handshake from 127.0.0.1: ");
  CHECK(said != std::string::npos);
  CHECK(manager.log().find("refused a TLS handshake from 127.0.0.1: ", said + 1) ==
        std::string::npos);
  CHECK(first.wait_exit() == 0);
  CHECK(second.wait_exit() == 0);
  // The launcher gives its manager and every worker the same TLS files.
  std::string launch = std::string(BAMBOO_TRAIN_BIN) +
                       " --processes --stages 2 --layers 2 --steps 5 --quiet";
  for (const auto& a : tls("ca"))
    launch += " " + a;
  const auto launched = run_command(launch);
  INFO(launched.output);
  CHECK(launched.status == 0);
}
