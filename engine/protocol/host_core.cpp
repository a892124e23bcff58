// Placeholder: the real implementation is being written. Compiles so the tree configures.
#include "host_core.hpp"
