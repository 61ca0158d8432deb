#include <dqlite.h>
