// What actors say to each other: atoms and message types. The step report and
// commit are the schema's structs, so the same values cross a process boundary
// through the codec unchanged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <caf/atom.hpp>
#include <caf/meta/type_name.hpp>

#include "schema/codec.hpp"

namespace caf {
class actor_system_config;
}

namespace bamboo {

using train_atom = caf::atom_constant<caf::atom("train")>;
using run_step_atom = caf::atom_constant<caf::atom("runstep")>;
using committed_atom = caf::atom_constant<caf::atom("committed")>;
using step_failed_atom = caf::atom_constant<caf::atom("stepfail")>;
using params_atom = caf::atom_constant<caf::atom("params")>;
using done_atom = caf::atom_constant<caf::atom("done")>;

// A parameter's values, for comparing runs bit for bit.
struct param_blob {
  std::string name;
  std::vector<float> values;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, param_blob& x) {
  return f(caf::meta::type_name("param_blob"), x.name, x.values);
}

void register_messages(caf::actor_system_config& cfg);

} // namespace bamboo

namespace bamboo::schema {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_report& x) {
  return f(caf::meta::type_name("step_report"), x.node, x.stage, x.generation, x.step,
           x.loss_sum, x.grad_squares);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, commit& x) {
  return f(caf::meta::type_name("commit"), x.generation, x.step, x.clip_coef);
}

} // namespace bamboo::schema
