#include "transport/gloo_transport.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "log/log.hpp"

namespace bamboo {

namespace {

// c10d's view of a rendezvous_store.
class store_adapter final : public c10d::Store {
public:
  store_adapter(std::shared_ptr<rendezvous_store> s, std::chrono::milliseconds timeout)
      : s_(std::move(s)) {
    timeout_ = timeout;
  }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    s_->set(key, value);
  }
  std::vector<uint8_t> compareSet(const std::string& key,
                                  const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return s_->compare_set(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    return s_->get(key, timeout_);
  }
  int64_t add(const std::string& key, int64_t value) override {
    return s_->add(key, value);
  }
  bool deleteKey(const std::string& key) override { return s_->remove(key); }
  bool check(const std::vector<std::string>& keys) override { return s_->check(keys); }
  int64_t getNumKeys() override { return s_->num_keys(); }
  void wait(const std::vector<std::string>& keys) override { s_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    s_->wait(keys, timeout);
  }

private:
  std::shared_ptr<rendezvous_store> s_;
};

// A store whose waits end early when the group's generation ended: a rank
// that died before it wrote its address would hold every other rank's join
// (and its actor) for the whole timeout, and no transport exists yet to abort.
// Waits go in slices; between them `ended` is asked.
class ending_store final : public c10d::Store {
public:
  ending_store(c10::intrusive_ptr<c10d::Store> base,
               std::function<std::optional<std::string>()> ended,
               std::chrono::milliseconds timeout)
      : base_(std::move(base)), ended_(std::move(ended)) {
    timeout_ = timeout;
  }
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    base_->set(key, value);
  }
  std::vector<uint8_t> compareSet(const std::string& key,
                                  const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override {
    return base_->compareSet(key, expected, desired);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    wait({key}, timeout_);
    return base_->get(key);
  }
  int64_t add(const std::string& key, int64_t value) override {
    return base_->add(key, value);
  }
  bool deleteKey(const std::string& key) override { return base_->deleteKey(key); }
  bool check(const std::vector<std::string>& keys) override { return base_->check(keys); }
  int64_t getNumKeys() override { return base_->getNumKeys(); }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    constexpr std::chrono::milliseconds slice{200};
    const auto until = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto why = ended_())
        throw std::runtime_error(*why);
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      try {
        base_->wait(keys, std::max(std::chrono::milliseconds(1), std::min(slice, left)));
        return;
      } catch (const std::exception& e) {
        const std::string what = e.what();
        const bool timed_out = what.find("imeout") != std::string::npos ||
                               what.find("imed out") != std::string::npos;
        if (!timed_out || left <= slice)
          throw;
      }
    }
  }

private:
  c10::intrusive_ptr<c10d::Store> base_;
  std::function<std::optional<std::string>()> ended_;
};

} // namespace

struct gloo_store_server::impl {
  c10::intrusive_ptr<c10d::TCPStore> store;
};

gloo_store_server::gloo_store_server(std::uint16_t port, const std::string& host)
    : impl_(std::make_unique<impl>()) {
  c10d::TCPStoreOptions o;
  o.port = port;
  o.isServer = true;
  o.waitWorkers = false;
  o.timeout = default_gloo_timeout;
  impl_->store = c10::make_intrusive<c10d::TCPStore>(host, o);
}

gloo_store_server::~gloo_store_server() = default;

std::uint16_t gloo_store_server::port() const {
  return impl_->store->getPort();
}

namespace {

// Gloo tags are non-negative ints: the low 31 bits of make_tag's, distinct for
// 2^18 consecutive steps (a step's tensors are all consumed before the next
// step's are sent, so only a handful of steps are ever in flight).
int gloo_tag(std::uint64_t tag) {
  return static_cast<int>(tag & 0x7fffffffULL);
}

// The step a tag (make_tag) belongs to.
std::int64_t step_of(std::uint64_t tag) {
  return static_cast<std::int64_t>(tag >> tag_step_shift);
}

// A send of an earlier step has been received (the step committed everywhere
// before this one began): waiting for it returns at once. A wait this long
// means something else is wrong; the send is then kept until the group ends.
constexpr std::chrono::milliseconds send_release_timeout{1000};

} // namespace

struct gloo_transport::impl {
  gloo_group_spec spec;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg;
  std::mutex mtx;
  bool aborted = false;
  std::string reason;
  // Sends and recvs in flight, by a number of their own: several threads may
  // share an endpoint, so one's reap() may drop another's completed recv.
  std::map<std::uint64_t, c10::intrusive_ptr<c10d::Work>> pending;
  // The step of each pending send. c10d marks a send complete only when
  // someone waits for it, so sends are released by release_sends().
  std::map<std::uint64_t, std::int64_t> send_step;
  std::vector<c10::intrusive_ptr<c10d::Work>> stuck; // failed to release: kept
  std::uint64_t next_id = 0;

  // Keeps w until it completes, so that abort() can end it. Returns nullopt,
  // with w aborted, when the group was aborted after the caller checked:
  // abort() has gone through the pending works already and would miss w,
  // which would then wait for its full timeout.
  std::optional<std::uint64_t> track(const c10::intrusive_ptr<c10d::Work>& w) {
    {
      std::lock_guard<std::mutex> guard{mtx};
      if (!aborted) {
        pending.emplace(++next_id, w);
        return next_id;
      }
    }
    try {
      w->abort();
    } catch (const std::exception&) {
    }
    return std::nullopt;
  }
  void untrack(std::uint64_t id) {
    std::lock_guard<std::mutex> guard{mtx};
    pending.erase(id);
  }
  // Waits for (at once: they were received) and drops the sends of steps
  // before `step`; without this every sent tensor stayed, and a long run's
  // workers grew by each step's activations, gradients and shadow updates.
  void release_sends(std::int64_t step) {
    std::vector<std::pair<std::uint64_t, c10::intrusive_ptr<c10d::Work>>> done;
    {
      std::lock_guard<std::mutex> guard{mtx};
      for (auto it = send_step.begin(); it != send_step.end();)
        if (it->second < step) {
          if (auto w = pending.find(it->first); w != pending.end())
            done.emplace_back(it->first, w->second);
          it = send_step.erase(it);
        } else {
          ++it;
        }
    }
    std::vector<c10::intrusive_ptr<c10d::Work>> kept;
    for (auto& [id, w] : done) {
      try {
        w->wait(send_release_timeout);
      } catch (const std::exception& e) {
        log::get("bamboo.transport")
            ->warn("a send of an earlier step did not complete: {}", e.what());
        kept.push_back(w);
      }
    }
    std::lock_guard<std::mutex> guard{mtx};
    for (auto& [id, w] : done)
      pending.erase(id);
    stuck.insert(stuck.end(), kept.begin(), kept.end());
  }
  bool is_aborted(std::string& why) {
    std::lock_guard<std::mutex> guard{mtx};
    why = reason;
    return aborted;
  }
  // Completed sends are dropped; called before each new operation.
  void reap() {
    std::lock_guard<std::mutex> guard{mtx};
    for (auto it = pending.begin(); it != pending.end();)
      it = it->second->isCompleted() ? pending.erase(it) : std::next(it);
  }
};

gloo_transport::gloo_transport(std::unique_ptr<impl> p) : impl_(std::move(p)) {}

gloo_transport::~gloo_transport() {
  abort("transport closed");
}

std::unique_ptr<gloo_transport> gloo_transport::join(const gloo_group_spec& spec,
                                                     std::string& error) {
  try {
    c10::intrusive_ptr<c10d::Store> base;
    if (spec.store) {
      base = c10::make_intrusive<store_adapter>(spec.store, spec.timeout);
    } else {
      c10d::TCPStoreOptions so;
      so.port = spec.store_port;
      so.isServer = false;
      so.timeout = spec.timeout;
      base = c10::make_intrusive<c10d::TCPStore>(spec.store_host, so);
    }
    if (spec.ended)
      base = c10::make_intrusive<ending_store>(base, spec.ended, spec.timeout);
    auto store = c10::make_intrusive<c10d::PrefixStore>(
        "bamboo/gen" + std::to_string(spec.generation), base);
    auto opts = c10d::ProcessGroupGloo::Options::create(spec.timeout);
    opts->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname(spec.device_host));
    opts->threads = 2;
    auto p = std::make_unique<impl>();
    p->spec = spec;
    p->pg =
        c10::make_intrusive<c10d::ProcessGroupGloo>(store, spec.rank, spec.size, opts);
    return std::unique_ptr<gloo_transport>(new gloo_transport(std::move(p)));
  } catch (const std::exception& e) {
    error = "gloo group of generation " + std::to_string(spec.generation) + ", rank " +
            std::to_string(spec.rank) + ": " + e.what();
    return nullptr;
  }
}

int gloo_transport::rank() const {
  return impl_->spec.rank;
}

int gloo_transport::size() const {
  return impl_->spec.size;
}

std::uint64_t gloo_transport::generation() const {
  return impl_->spec.generation;
}

transport_status gloo_transport::send(int dst, std::uint64_t tag, const at::Tensor& t) {
  std::string why;
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  if (!valid_peer(dst) || !t.defined())
    return {transport_errc::invalid, "send to rank " + std::to_string(dst)};
  impl_->reap();
  impl_->release_sends(step_of(tag));
  try {
    // Gloo sends from the tensor's memory until the work completes; the
    // work keeps a reference, and callers never modify what they sent.
    std::vector<at::Tensor> v{t.is_contiguous() ? t : t.contiguous()};
    const auto id = impl_->track(impl_->pg->send(v, dst, gloo_tag(tag)));
    if (!id && impl_->is_aborted(why))
      return {transport_errc::aborted, why};
    if (id) {
      std::lock_guard<std::mutex> guard{impl_->mtx};
      impl_->send_step[*id] = step_of(tag);
    }
  } catch (const std::exception& e) {
    return {transport_errc::peer_lost, e.what()};
  }
  return {};
}

transport_status gloo_transport::recv(int src, std::uint64_t tag, at::Tensor& out,
                                      std::chrono::milliseconds timeout) {
  std::string why;
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  if (!valid_peer(src) || !out.defined())
    return {transport_errc::invalid, "recv from rank " + std::to_string(src) +
                                         " needs a tensor of the right shape"};
  impl_->reap();
  std::vector<at::Tensor> v{out};
  c10::intrusive_ptr<c10d::Work> work;
  try {
    work = impl_->pg->recv(v, src, gloo_tag(tag));
  } catch (const std::exception& e) {
    return {transport_errc::peer_lost, e.what()};
  }
  const auto id = impl_->track(work);
  if (!id && impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  transport_status st;
  try {
    const blocked_scope blocked{blocked_};
    work->wait(timeout);
  } catch (const std::exception& e) {
    const std::string what = e.what();
    st = {what.find("imed out") != std::string::npos ? transport_errc::timeout
                                                     : transport_errc::peer_lost,
          what};
  }
  impl_->untrack(*id);
  // An aborted wait returns normally with a partial tensor: never trust it.
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  if (st)
    out = v[0];
  return st;
}

void gloo_transport::abort(const std::string& reason) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    if (impl_->aborted)
      return;
    impl_->aborted = true;
    impl_->reason = reason;
    for (auto& [id, w] : impl_->pending)
      works.push_back(w);
  }
  for (auto& w : works) {
    try {
      w->abort();
    } catch (const std::exception& e) {
      log::get("bamboo.transport")->debug("abort of a pending work: {}", e.what());
    }
  }
}

transport_status gloo_transport::flush(std::chrono::milliseconds timeout) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  {
    std::lock_guard<std::mutex> guard{impl_->mtx};
    for (auto& [id, w] : impl_->pending)
      works.push_back(w);
  }
  for (auto& w : works) {
    try {
      w->wait(timeout);
    } catch (const std::exception& e) {
      return {transport_errc::peer_lost, e.what()};
    }
  }
  std::string why;
  if (impl_->is_aborted(why))
    return {transport_errc::aborted, why};
  impl_->reap();
  return {};
}

} // namespace bamboo
