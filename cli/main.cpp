#include "shardcheck/cli.hpp"

int main(int argc, char** argv) { return shardcheck::cli_main(argc, argv); }
