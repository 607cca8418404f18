// bamboo-train: the library's train_main with the built-in models (GPT, BERT).
#define BAMBOO_MAIN_ENTRY_ONLY
#include "examples/programs/main.hpp"

int main(int argc, char** argv) {
  return bamboo::train_main(argc, argv, nullptr);
}
