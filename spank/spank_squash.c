/* spank_squash: mounts squashfs images for Slurm jobs (--squash-image).
 *
 * Entry points only: each one dispatches on the context it runs in.
 *   sbatch/salloc/srun (as the user)   submit_check.c, env_default.c
 *   slurmd prolog/epilog (root)        job_request.c
 *   slurmstepd, every step (root)      step_setup.c, step_images.c (srun's own images)
 *   each task (root, then the user)    task_hooks.c
 * See docs/architecture.md and spank_squash(8). */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <slurm/spank.h>
#include <slurm/slurm_version.h>

#include "env_default.h"
#include "env_option.h"
#include "frame.h"
#include "job_request.h"
#include "loaded_twice.h"
#include "plugin_settings.h"
#include "step_failure.h"
#include "step_images.h"
#include "step_setup.h"
#include "submit_check.h"
#include "task_hooks.h"

SPANK_PLUGIN(squash, 1);

#if HAVE_DECL_SLURM_SPANK_INIT_FAILURE_MODE
/* Slurm 25.05 on: when slurm_spank_init fails in slurmstepd (a bad
 * plugstack.conf line), fail the job instead of draining the node (the
 * default, ESPANK_NODE_FAILURE). Earlier releases always drain. */
int slurm_spank_init_failure_mode = ESPANK_JOB_FAILURE;
#endif

static struct squash_settings settings;
static bool settings_loaded;
/* Why images cannot be used on this host: its plugstack.conf line is bad,
 * or names the plugin twice. */
static char settings_problem[768];
static char *image_option; /* --squash-image as given; NULL when absent */
static char option_usage[512];

/* Only stores the text: Slurm may call this more than once, with the same
 * value or (a later option on the command line) another one. */
static int image_option_cb(int val, const char *optarg, int remote)
{
	char *copy;

	if (!optarg)
		return -1;
	if (image_option && !strcmp(image_option, optarg))
		return 0;
	copy = strdup(optarg);
	if (!copy) {
		slurm_error("squash: out of memory");
		return -1;
	}
	free(image_option);
	image_option = copy;
	return 0;
}

static struct spank_option image_opt = {
	.name = "squash-image",
	.arginfo = "IMAGE[:TARGET[:rw[=DIR]]][,...]",
	.usage = option_usage,
	.has_arg = 1,
	.val = 0,
	.cb = image_option_cb,
};

static int register_option(spank_t sp)
{
	spank_err_t rc;

	snprintf(option_usage, sizeof option_usage,
		 "Mount squashfs IMAGE read-only at TARGET in the job's steps "
		 "(default %s/NAME, NAME = file name without .sqfs/.squashfs/.sqsh/.sfs). "
		 "IMAGE is a file, or @NAME[/VERSION] from the site's catalogs or your own (newest "
		 "version when none is given). :rw makes it writable, changes discarded "
		 "at the job's end or kept in DIR. Comma-separate several images",
		 settings_loaded ? settings.default_target : "DEFAULT_TARGET");
	rc = spank_option_register(sp, &image_opt);
	if (rc != ESPANK_SUCCESS) {
		slurm_error("spank_squash: cannot register --squash-image: %s",
			    spank_strerror(rc));
		return -1;
	}
	rc = spank_option_register(sp, squash_env_option());
	if (rc != ESPANK_SUCCESS) {
		slurm_error("spank_squash: cannot register --squash-env: %s", spank_strerror(rc));
		return -1;
	}
	return 0;
}

static int load_settings(int ac, char **av)
{
	char err[512];

	if (settings_loaded)
		return 0;
	if (squash_settings_parse(ac, av, &settings, err, sizeof err) != 0) {
		slurm_error("%s", err);
		snprintf(settings_problem, sizeof settings_problem,
			 "the plugstack.conf line for spank_squash is invalid (%s)", err);
		return -1;
	}
	settings_loaded = true;
	return 0;
}

static void unload_settings(void)
{
	if (settings_loaded)
		squash_settings_free(&settings);
	settings_loaded = false;
}

/* srun (local context) inside an allocation runs a step: the job's images
 * were fixed when the allocation was made, and its steps get those; srun
 * may add a step's own (step_images.h). */
static bool srun_in_allocation(void)
{
	return getenv("SLURM_JOB_ID") != NULL;
}

/* Which Slurm this build is for, once per process: in slurmd's and
 * slurmstepd's logs; only at debug level in sbatch/srun/salloc, where info
 * would reach the user's terminal. */
static void log_build_once(void)
{
	static bool logged;

	if (logged)
		return;
	logged = true;
	const unsigned v = SLURM_VERSION_NUMBER;
	if (spank_context() == S_CTX_ALLOCATOR || spank_context() == S_CTX_LOCAL)
		slurm_debug("spank_squash %s built for Slurm %u.%02u.%u, protocol %d", PACKAGE_VERSION,
			    SLURM_VERSION_MAJOR(v), SLURM_VERSION_MINOR(v), SLURM_VERSION_MICRO(v),
			    SQUASH_PROTOCOL_VERSION);
	else
		slurm_info("spank_squash %s built for Slurm %u.%02u.%u, protocol %d", PACKAGE_VERSION,
			   SLURM_VERSION_MAJOR(v), SLURM_VERSION_MINOR(v), SLURM_VERSION_MICRO(v),
			   SQUASH_PROTOCOL_VERSION);
}

/* The second plugstack.conf line naming this plugin (loaded_twice.h).
 * slurmd does not start, so the admin sees it at once; elsewhere (a submit
 * host, or plugstack.conf changed since slurmd started) images are refused
 * with the reason, as for a bad line, and jobs without images run. */
static int loaded_twice(void)
{
	switch (spank_context()) {
	case S_CTX_SLURMD:
		slurm_error("spank_squash: %s, then start slurmd again", squash_loaded_twice_reason);
		return -1;
	case S_CTX_REMOTE:
		slurm_error("spank_squash: %s", squash_loaded_twice_reason);
		break;
	default:
		/* The user's terminal: they read it if they ask for images. */
		slurm_debug("spank_squash: %s", squash_loaded_twice_reason);
		break;
	}
	unload_settings();
	snprintf(settings_problem, sizeof settings_problem, "%s", squash_loaded_twice_reason);
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (squash_init_seen_before())
		return loaded_twice();
	log_build_once();
	/* A bad plugstack.conf line fails the jobs that ask for images, with
	 * the reason (init_post_opt), and nothing else: failing init would
	 * fail every job on the node (25.05 on, ESPANK_JOB_FAILURE) or drain
	 * it (before), images or not. */
	load_settings(ac, av);
	switch (spank_context()) {
	case S_CTX_ALLOCATOR:
		/* Before Slurm reads options from the environment. */
		squash_env_default_apply(SQUASH_DEFAULT_ALLOCATOR);
		return register_option(sp);
	case S_CTX_LOCAL:
		/* A default must not turn into a request for step images. */
		if (!srun_in_allocation())
			squash_env_default_apply(SQUASH_DEFAULT_SRUN);
		return register_option(sp);
	case S_CTX_REMOTE:
		return register_option(sp);
	default:
		return 0;
	}
}

/* An image was asked for, but this host's plugstack.conf is wrong for the
 * plugin. The user cannot fix that: say whom to ask, and what to pass on. */
static int refuse_misconfigured(void)
{
	char host[256] = "?";

	gethostname(host, sizeof host - 1);
	if (spank_context() == S_CTX_REMOTE) {
		squash_step_fail("squash: node %s cannot mount images: %s. Ask your administrator "
				 "to fix plugstack.conf on %s (quote this message); jobs without "
				 "--squash-image run there", host, settings_problem, host);
		return 0; /* the tasks fail with it */
	}
	slurm_error("squash: cannot use --squash-image on %s: %s. Ask your administrator to fix "
		    "plugstack.conf on %s (quote this message)", host, settings_problem, host);
	return -1;
}

/* sbatch, salloc (srun false) or srun making its own allocation. */
static int submit_check(spank_t sp, bool srun)
{
	if (squash_submit_check(sp, image_option, &settings, srun) == 0)
		return 0;
	if (squash_env_default_source(SQUASH_DEFAULT_IMAGES, image_option))
		slurm_error("squash: the images came from %s in the environment; correct or unset it, or give --squash-image on the command line",
			    squash_env_default_source(SQUASH_DEFAULT_IMAGES, image_option));
	return -1;
}

/* --squash-env checked at submission. A default from the environment
 * (SBATCH_SQUASH_ENV in a login profile) says nothing to a job without
 * images: it is dropped, not refused. */
static int env_check(void)
{
	const char *source = squash_env_default_source(SQUASH_DEFAULT_ENVS, squash_env_option_value());

	if (source && !image_option) {
		squash_env_default_drop(SQUASH_DEFAULT_ENVS);
		squash_env_option_clear();
		return 0;
	}
	return squash_env_option_check(image_option != NULL, source);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	if (!settings_loaded && image_option)
		return refuse_misconfigured();
	if (!settings_loaded)
		return 0;
	switch (spank_context()) {
	case S_CTX_ALLOCATOR:
		if (env_check())
			return -1;
		return submit_check(sp, false);
	case S_CTX_LOCAL:
		if (env_check())
			return -1;
		if (srun_in_allocation())
			return squash_step_images_check(sp, image_option, &settings);
		return submit_check(sp, true);
	case S_CTX_REMOTE:
		return squash_step_setup(sp, image_option, &settings);
	default:
		return 0;
	}
}

/* The job prolog or epilog of the plugin's second plugstack.conf line: the
 * first one did the work, and failing would drain the node. */
static int job_script_loaded_twice(const char *which)
{
	slurm_error("spank_squash: %s; its job %s ran once", squash_loaded_twice_reason, which);
	return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char **av)
{
	int rc;

	switch (spank_context()) {
	case S_CTX_JOB_SCRIPT:
		if (squash_prolog_seen_before())
			return job_script_loaded_twice("prolog");
		/* Slurm (22.05) does not call slurm_spank_init before the job
		 * prolog/epilog. Bad settings are logged; the steps fail on them. */
		rc = load_settings(ac, av) ? 0 : squash_job_prolog(sp, &settings);
		unload_settings();
		return rc;
	default:
		return 0;
	}
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	int rc;

	switch (spank_context()) {
	case S_CTX_JOB_SCRIPT:
		if (squash_epilog_seen_before())
			return job_script_loaded_twice("epilog");
		rc = load_settings(ac, av) ? 0 : squash_job_epilog(sp, &settings);
		unload_settings();
		return rc;
	default:
		return 0;
	}
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_REMOTE:
		return squash_step_task_privileged(sp);
	default:
		return 0;
	}
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	switch (spank_context()) {
	case S_CTX_REMOTE:
		return squash_step_task_init(sp);
	default:
		return 0;
	}
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	if (spank_context() == S_CTX_REMOTE && settings_loaded)
		squash_step_images_release(&settings);
	squash_step_setup_cleanup();
	squash_step_failure_clear();
	squash_env_option_clear();
	free(image_option);
	image_option = NULL;
	unload_settings();
	squash_init_forget();
	return 0;
}
