// What a worker needs to take the manager's assignment, checked before any of
// its actors start: the run's configuration (carried by the frame), the data,
// the partition and, when it resumes, the checkpoint. A plain function, so
// that every way an assignment can be refused is tested without actors.
#pragma once

#include <memory>
#include <vector>

#include <caf/expected.hpp>

#include "actors/node.hpp"
#include "model/config.hpp"
#include "model/partition.hpp"
#include "schema/codec.hpp"

namespace bamboo {

class token_corpus;
struct checkpoint;
class model_definition;

struct assignment_inputs {
  train_config cfg;
  std::shared_ptr<const token_corpus> corpus;
  std::vector<stage_range> parts;
  std::shared_ptr<const checkpoint> resume; // null: from the first step
  node_assignment node;                     // the stage, the replica, their layers
};

// errc::invalid_config saying why when the configuration does not validate,
// the data cannot be loaded, a stage is out of range or the checkpoint is not
// this run's.
// `local_model`: the trainer's own model this worker builds (null: none).
caf::expected<assignment_inputs>
take_assignment(const schema::assign& a,
                const std::shared_ptr<const model_definition>& local_model = nullptr);

} // namespace bamboo
