// bamboo-worker: the library's worker_main with the built-in models (GPT, BERT).
#define BAMBOO_MAIN_ENTRY_ONLY
#include "examples/programs/main.hpp"

int main(int argc, char** argv) {
  return bamboo::worker_main(argc, argv, nullptr);
}
