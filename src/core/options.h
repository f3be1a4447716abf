/* The loader's options (PL_OPTION_MAP): what pl_loader_create needs besides
 * the public calls of core/options.c. */
#ifndef PL_OPTIONS_H
#define PL_OPTIONS_H

#include "core/common.h"

/* Every option against its range in the table, and rank < world_size. The
 * error names the option and its range. */
pl_status pl_options_check(const pl_loader_config *cfg, pl_error *err);

/* A caller's config (NULL: the defaults) as this library's full struct:
 * checks in->struct_size (PL_LOADER_CONFIG_MIN_SIZE to sizeof) and gives
 * the fields past it their defaults. Does not check the options. */
pl_status pl_loader_config_upgrade(const pl_loader_config *in,
                                   pl_loader_config *out, pl_error *err);

#endif /* PL_OPTIONS_H */
