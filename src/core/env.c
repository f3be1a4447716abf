/* Sharding defaults from the launchers people already use: torchrun's
 * RANK / WORLD_SIZE / LOCAL_RANK, Open MPI's OMPI_COMM_WORLD_*, and PMI's
 * PMI_RANK / PMI_SIZE (MPICH, Intel MPI, Slurm's PMI). */
#include "core/common.h"

#include <errno.h>
#include <stdio.h>
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

static const char *const rank_vars[] = {"RANK", "OMPI_COMM_WORLD_RANK",
                                        "PMI_RANK", NULL};
static const char *const world_vars[] = {"WORLD_SIZE", "OMPI_COMM_WORLD_SIZE",
                                         "PMI_SIZE", NULL};
static const char *const local_vars[] = {"LOCAL_RANK",
                                         "OMPI_COMM_WORLD_LOCAL_RANK", NULL};

/* "RANK=3", or the argument's name when the caller set it. */
static const char *source(char *buf, size_t n, const char *var, uint32_t v,
                          const char *arg) {
  if (var)
    snprintf(buf, n, "%s=%u", var, v);
  else
    snprintf(buf, n, "%s %u", arg, v);
  return buf;
}

/* The environment's world size against an explicit one: under a launcher,
 * the environment's rank only means something in its own world. */
static pl_status check_world(uint32_t explicit_w, uint32_t env_w,
                             const char *var, pl_error *err) {
  if (!var || env_w == explicit_w)
    return PL_OK;
  return pl_errorf(err, PL_INVALID_ARGUMENT,
                   "world_size %u disagrees with the environment's %s=%u: "
                   "pass rank too, or make them agree",
                   explicit_w, var, env_w);
}

static void announce(const pl_loader_config *cfg, uint32_t r, uint32_t w,
                     const char *fr, const char *fw) {
  if (!cfg->log || cfg->log_level > PL_LOG_INFO || (!fr && !fw))
    return;
  char msg[160];
  snprintf(msg, sizeof msg,
           "sharding from the environment: rank %u of %u (%s, %s)", r, w,
           fr ? fr : "rank set", fw ? fw : "world_size set");
  cfg->log(cfg->log_user, PL_LOG_INFO, msg);
}

pl_status pl_loader_config_shard_env(pl_loader_config *cfg, unsigned keep,
                                     pl_error *err) {
  if (!cfg)
    return pl_errorf(err, PL_INVALID_ARGUMENT, "cfg is NULL");
  uint32_t r = cfg->rank, w = cfg->world_size, er = 0, ew = 0, l = 0;
  const char *fr, *fw, *fl;
  PL_TRY(env_u32(rank_vars, &er, &fr, err));
  PL_TRY(env_u32(world_vars, &ew, &fw, err));
  PL_TRY(env_u32(local_vars, &l, &fl, err));
  if (keep & PL_KEEP_RANK)
    fr = NULL; /* the caller's rank wins */
  if ((keep & PL_KEEP_WORLD_SIZE) && !(keep & PL_KEEP_RANK))
    PL_TRY(check_world(w, ew, fw, err));
  if (keep & PL_KEEP_WORLD_SIZE)
    fw = NULL;
  if (fr)
    r = er;
  if (fw)
    w = ew;
  if (w == 0 || r >= w) {
    char a[48], b[48];
    return pl_errorf(err, PL_INVALID_ARGUMENT,
                     "rank must be below world_size: %s is not below %s",
                     source(a, sizeof a, fr, r, "rank"),
                     source(b, sizeof b, fw, w, "world_size"));
  }
  cfg->rank = r;
  cfg->world_size = w;
  if (fl && l <= INT32_MAX && !(keep & PL_KEEP_DEVICE_INDEX))
    cfg->device_index = (int)l;
  announce(cfg, r, w, fr, fw);
  return PL_OK;
}

pl_status pl_loader_config_from_env(pl_loader_config *cfg, pl_error *err) {
  return pl_loader_config_shard_env(cfg, 0, err);
}
