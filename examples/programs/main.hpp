// bamboo's entry header for a trainer with a model of its own: the programs
// bamboo-train, bamboo-manager and bamboo-worker as library calls, so that one
// binary (the trainer's) plays every role and every process builds the same
// model. A trainer's main is one line:
//
//   int main(int argc, char** argv) {
//     return bamboo::main(argc, argv, std::make_shared<my_model>());
//   }
//
// and then, with bamboo-train's options:
//   my_trainer --stages 3 ...                    trains in this process
//   my_trainer --processes --stages 3 ...        a manager and a worker per stage,
//                                                each this binary again
//   my_trainer manager --stages 3 --workers 3    the cluster's manager
//   my_trainer worker --manager HOST:PORT        one node (on any host)
//
// Installed as <bamboo/main.hpp>; it brings the model interface
// (model_definition) and the embedded run (run_embedded) with it.
#pragma once

#include <memory>

// bamboo-train, -manager and -worker, whose mains only call an entry point,
// define BAMBOO_MAIN_ENTRY_ONLY: they compile in a tenth of the time.
#ifndef BAMBOO_MAIN_ENTRY_ONLY
#include "actors/embedded_cluster.hpp"
#include "model/model_definition.hpp"
#endif

namespace bamboo {

class model_definition;

// Dispatches on argv[1]: "manager" and "worker" run those roles with the rest
// of the arguments, "train" (or any option) trains as bamboo-train does.
// `model` is the trainer's (null: GPT or BERT, chosen by --model). Returns the
// process's exit status: 0 done, 1 a failed run, 2 bad input.
int main(int argc, char** argv, std::shared_ptr<const model_definition> model);

// The three roles, for a program that dispatches by itself.
int train_main(int argc, char** argv, std::shared_ptr<const model_definition> model);
int manager_main(int argc, char** argv, std::shared_ptr<const model_definition> model);
int worker_main(int argc, char** argv, std::shared_ptr<const model_definition> model);

} // namespace bamboo
