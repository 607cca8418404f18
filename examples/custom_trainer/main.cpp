// A custom trainer: bamboo with a model of its own (a convolutional image
// classifier, conv_classifier.hpp). bamboo::main gives this one binary every
// role, from bamboo-train's options:
//
//   custom_trainer --stages 3 --steps 12            trains here, 3 stages
//   custom_trainer --processes --stages 3 --preempt node=1@step=4
//                                                   a manager and 3 workers, each
//                                                   this binary, one of them killed
//   custom_trainer manager ... / worker --manager HOST:PORT   one role per host
//
// Every run gives the same losses, bit for bit, whatever the stages and kills.
#include <memory>

#include <bamboo/main.hpp>

#include "conv_classifier.hpp"

int main(int argc, char** argv) {
  return bamboo::main(argc, argv, std::make_shared<conv_example::conv_classifier>());
}
