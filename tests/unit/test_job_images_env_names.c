/* The job's image list in the environment (proto/squash_env.h): read
 * under its own name, SQUASH_JOB_IMAGES with Slurm's prefixes, and under
 * the name a job submitted by the 0.1.0 plugin carries; never confused
 * with the tasks' SQUASH_IMAGES. No root needed. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "squash_env.h"
#include "unit.h"

static void each_list_has_its_own_name(void)
{
	CHECK(strcmp(SQUASH_ENV_JOB_IMAGES, SQUASH_ENV_TASK_IMAGES) != 0);
	CHECK(strcmp(SQUASH_ENV_JOB_IMAGES, SQUASH_ENV_STEP_IMAGES) != 0);
	CHECK_STR(SQUASH_ENV_JOB_IMAGES_PROLOG, "SPANK_SQUASH_JOB_IMAGES");
	CHECK_STR(SQUASH_ENV_JOB_IMAGES_STEP, "SLURM_SPANK_SQUASH_JOB_IMAGES");
	CHECK_STR(SQUASH_ENV_TASK_IMAGES, "SQUASH_IMAGES");
}

static void the_job_list_is_read_under_its_name_before_the_old_one(void)
{
	unsetenv(SQUASH_ENV_JOB_IMAGES_PROLOG);
	unsetenv(SQUASH_ENV_JOB_IMAGES_STEP);
	unsetenv(SQUASH_ENV_JOB_IMAGES_PROLOG_0_1);
	unsetenv(SQUASH_ENV_JOB_IMAGES_STEP_0_1);
	CHECK(squash_env_job_images(true) == NULL);
	CHECK(squash_env_job_images(false) == NULL);
	/* The tasks' list is not the job's. */
	setenv(SQUASH_ENV_TASK_IMAGES, "/a.sqfs", 1);
	CHECK(squash_env_job_images(true) == NULL);
	CHECK(squash_env_job_images(false) == NULL);
	/* A job submitted before the upgrade. */
	setenv("SPANK_SQUASH_IMAGES", "/old.sqfs:/squash/old", 1);
	setenv("SLURM_SPANK_SQUASH_IMAGES", "/old.sqfs:/squash/o", 1);
	CHECK_STR(squash_env_job_images(true), "/old.sqfs:/squash/old");
	CHECK_STR(squash_env_job_images(false), "/old.sqfs:/squash/o");
	/* Its own name wins. */
	setenv(SQUASH_ENV_JOB_IMAGES_PROLOG, "/new.sqfs:/squash/new", 1);
	setenv(SQUASH_ENV_JOB_IMAGES_STEP, "/new.sqfs:/squash/n", 1);
	CHECK_STR(squash_env_job_images(true), "/new.sqfs:/squash/new");
	CHECK_STR(squash_env_job_images(false), "/new.sqfs:/squash/n");
}

int main(void)
{
	each_list_has_its_own_name();
	the_job_list_is_read_under_its_name_before_the_old_one();
	return unit_exit_code();
}
