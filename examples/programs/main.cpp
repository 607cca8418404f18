#include "examples/programs/main.hpp"

#include <cstring>
#include <vector>

namespace bamboo {

int main(int argc, char** argv, std::shared_ptr<const model_definition> model) {
  if (argc < 2)
    return train_main(argc, argv, std::move(model));
  using role_main = int (*)(int, char**, std::shared_ptr<const model_definition>);
  role_main role = nullptr;
  if (std::strcmp(argv[1], "manager") == 0)
    role = manager_main;
  else if (std::strcmp(argv[1], "worker") == 0)
    role = worker_main;
  else if (std::strcmp(argv[1], "train") == 0)
    role = train_main;
  else
    return train_main(argc, argv, std::move(model));
  // The role's own command line: the program, then what follows the role.
  std::vector<char*> args{argv[0]};
  args.insert(args.end(), argv + 2, argv + argc);
  args.push_back(nullptr);
  return role(argc - 1, args.data(), std::move(model));
}

} // namespace bamboo
