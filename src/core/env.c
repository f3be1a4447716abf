/* Sharding defaults from the launchers people already use: torchrun's
 * RANK / WORLD_SIZE / LOCAL_RANK, Open MPI's OMPI_COMM_WORLD_*, and PMI's
 * PMI_RANK / PMI_SIZE (MPICH, Intel MPI, Slurm's PMI). */
#include "core/common.h"

#include <errno.h>
#include <stdlib.h>

/* Reads the first variable of `names` that is set, a plain decimal number
 * (strtoull alone would also take " 1", "+1" and "-1"). *found names it;
 * NULL if none is set. */
static pl_status env_u32(const char *const *names, uint32_t *out,
                         const char **found, pl_error *err) {
  *found = NULL;
  for (; *names; names++) {
    const char *v = getenv(*names);
    if (!v)
      continue;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    if (v[0] < '0' || v[0] > '9' || *end || errno || x > UINT32_MAX)
      return pl_errorf(err, PL_INVALID_ARGUMENT,
                       "environment variable %s=\"%s\" is not a rank number",
                       *names, v);
    *out = (uint32_t)x;
    *found = *names;
    return PL_OK;
  }
  return PL_OK;
}

pl_status pl_loader_config_from_env(pl_loader_config *cfg, pl_error *err) {
  static const char *const rank[] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                     "PMI_RANK", NULL};
  static const char *const world[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                      "PMI_SIZE", NULL};
  static const char *const local[] = {"LOCAL_RANK",
                                      "OMPI_COMM_WORLD_LOCAL_RANK", NULL};
  if (!cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "cfg is NULL");
  uint32_t r = cfg->rank, w = cfg->world_size, l = 0;
  const char *fr, *fw, *fl;
  PL_TRY(env_u32(rank, &r, &fr, err));
  PL_TRY(env_u32(world, &w, &fw, err));
  PL_TRY(env_u32(local, &l, &fl, err));
  if (w == 0 || r >= w)
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "rank %s%s%u is not below world size %s%s%u",
                     fr ? fr : "", fr ? "=" : "", r, fw ? fw : "",
                     fw ? "=" : "", w);
  cfg->rank = r;
  cfg->world_size = w;
  if (fl && l <= INT32_MAX)
    cfg->device_index = (int)l;
  return PL_OK;
}
