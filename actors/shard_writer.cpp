#include "actors/shard_writer.hpp"

#include <caf/all.hpp>

#include "actors/errors.hpp"
#include "model/checkpoint.hpp"

namespace bamboo {

namespace {

// The snapshot is the actor's argument (CAF 0.17 binds a null reference for an
// actor function without any, which UBSan reports); writing starts on request.
using write_atom = caf::atom_constant<caf::atom("write")>;

// CAF moves its arguments in: the snapshot is not copied.
caf::behavior shard_writer(caf::event_based_actor* self, shard_snapshot s) {
  return {
      [self, s = std::move(s)](write_atom) -> caf::result<checkpoint_shard> {
        self->quit();
        // A detached actor has this thread to itself until it quits.
        lower_writer_priority();
        std::string error;
        const double cpu0 = thread_cpu_seconds();
        auto shard = write_checkpoint_shard(s.step_dir, s.file, s.step, s.tensors, error);
        add_checkpoint_cpu(thread_cpu_seconds() - cpu0);
        if (!shard)
          return make_error(errc::checkpoint_failed, s.file + ": " + error);
        return *shard;
      },
  };
}

} // namespace

std::string shard_file(int stage) {
  return "stage-" + std::to_string(stage) + ".safetensors";
}

shard_snapshot make_snapshot(std::vector<param_blob> blobs, const std::string& step_dir,
                             int stage, std::int64_t step) {
  shard_snapshot s;
  s.step_dir = step_dir;
  s.file = shard_file(stage);
  s.step = step;
  for (auto& b : blobs)
    if (b.name.find("#steps") == std::string::npos)
      s.tensors.emplace(std::move(b.name), std::move(b.values));
  return s;
}

void write_shard(stage_actor::pointer self, shard_snapshot snap,
                 caf::typed_response_promise<checkpoint_shard> rp) {
  auto writer = self->spawn<caf::detached>(shard_writer, std::move(snap));
  self->request(writer, caf::infinite, write_atom::value)
      .then([rp](checkpoint_shard& s) mutable { rp.deliver(std::move(s)); },
            [rp](caf::error& err) mutable { rp.deliver(std::move(err)); });
}

} // namespace bamboo
