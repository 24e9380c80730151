/* A step's own images (see step_images.h). */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client.h"
#include "imagespec.h"
#include "request_codec.h"
#include "squash_env.h"
#include "step_failure.h"
#include "step_images.h"
#include "submit_check.h"
#include "target.h"


/* What this slurmstepd mounted, for the release at the end of the step. */
static bool step_mounted;
static uint32_t mounted_job, mounted_step;

/* An empty list on the heap (room for SQUASH_MAX_IMAGES items, 32 KiB),
 * or NULL after telling the user so. */
static struct squash_image_list *new_list(void)
{
	struct squash_image_list *list = calloc(1, sizeof(*list));

	if (!list)
		slurm_error("squash: out of memory for a list of images");
	return list;
}

/* A step image on a job image's target (or inside or above it) cannot be
 * mounted: say so now. squashd checks again with the job's record. */
static int check_clashes(const struct squash_image_list *step)
{
	const char *text = squash_env_job_images(false);
	struct squash_image_list *job;
	char why[256], clash[SQUASH_PATH_MAX * 4 + 256];
	int rc = 0;

	if (!text)
		return 0; /* squashd decides */
	job = new_list();
	if (!job)
		return -1;
	if (squash_imagespec_parse(text, job, why, sizeof why)) {
		free(job);
		return 0; /* squashd decides */
	}
	for (size_t i = 0; i < step->count && !rc; i++) {
		const struct squash_image_spec *s = &step->items[i];
		for (size_t k = 0; k < job->count && !rc; k++) {
			const struct squash_image_spec *j = &job->items[k];
			/* The same image at the same place is the job's own (1). */
			if (j->target && squash_step_target_clash(j->image, j->target, s->image, s->target,
								  clash, sizeof clash) < 0) {
				slurm_error("squash: %s: %s", s->image, clash);
				rc = -1;
			}
		}
	}
	squash_imagespec_free(job);
	free(job);
	return rc;
}

int squash_step_images_check(spank_t sp, const char *option, const struct squash_settings *s)
{
	const char *inherited = getenv(SQUASH_ENV_OPTION);
	struct squash_image_list *list;
	char *text;
	int rc = -1;

	(void)sp;
	/* Never pass on a list from an enclosing step (srun inside srun). */
	unsetenv(SQUASH_ENV_STEP_IMAGES);
	if (!option || (inherited && !strcmp(option, inherited)))
		return 0; /* the allocation's own images: its steps get them anyway */
	list = new_list();
	if (!list)
		return -1;
	if (squash_submit_check_list(option, s, list)) {
		free(list);
		return -1;
	}
	for (size_t i = 0; i < list->count; i++) {
		if (list->items[i].writable) {
			/* An overlay lives and goes with the job (squashd refuses too). */
			slurm_error("squash: %s: :rw is only for a job's own images (sbatch, salloc, or an "
				    "srun that creates the job); a step's own images are read-only",
				    list->items[i].image);
			goto out;
		}
	}
	if (check_clashes(list))
		goto out;
	text = squash_imagespec_format(list);
	if (!text) {
		slurm_error("squash: out of memory");
		goto out;
	}
	/* srun passes its environment to the step's slurmstepd. */
	if (setenv(SQUASH_ENV_STEP_IMAGES, text, 1) == 0)
		rc = 0;
	else
		slurm_error("squash: cannot pass the step's images to the step: %s", strerror(errno));
	free(text);
out:
	squash_imagespec_free(list);
	free(list);
	return rc;
}

/* The step's environment value of name, malloc'd, or NULL. */
static char *step_env(spank_t sp, const char *name)
{
	char *buf = malloc(SQUASH_OPTION_MAX + 1);

	if (buf && spank_getenv(sp, name, buf, SQUASH_OPTION_MAX + 1) == ESPANK_SUCCESS)
		return buf;
	free(buf);
	return NULL;
}

int squash_step_images_mount(spank_t sp, const struct squash_settings *s, uint32_t job_id,
			     uid_t uid, Squash__StepInfoRequest *info, char *err, size_t errlen)
{
	struct squash_client_options opts = squash_settings_client(s);
	Squash__ImageSpec *specs = NULL, **ptrs = NULL;
	Squash__MountJobRequest mount = SQUASH__MOUNT_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	struct squash_image_list *list;
	uint32_t step_id;
	char why[768], host[256] = "?", *text, *inherited;
	int rc = -1;

	if (spank_get_item(sp, S_JOB_STEPID, &step_id) != ESPANK_SUCCESS ||
	    step_id >= SQUASH_STEP_ID_LIMIT)
		return 0; /* the batch, extern and interactive steps have the job's images only */
	text = step_env(sp, SQUASH_ENV_STEP_IMAGES);
	if (!text)
		return 0;
	spank_unsetenv(sp, SQUASH_ENV_STEP_IMAGES); /* the tasks get SQUASH_IMAGES instead */
	list = calloc(1, sizeof(*list));
	if (!list) {
		snprintf(err, errlen, "cannot read the step's images: out of memory");
		free(text);
		return -1;
	}
	if (squash_imagespec_parse(text, list, why, sizeof why)) {
		snprintf(err, errlen, "cannot read the step's images: %s", why);
		free(text);
		free(list);
		return -1;
	}
	free(text);
	/* Heap, not stack: up to SQUASH_MAX_IMAGES of each. */
	specs = calloc(list->count ? list->count : 1, sizeof(*specs));
	ptrs = calloc(list->count ? list->count : 1, sizeof(*ptrs));
	if (!specs || !ptrs) {
		snprintf(err, errlen, "cannot mount the step's %zu image(s): out of memory",
			 list->count);
		goto out;
	}
	for (size_t i = 0; i < list->count; i++) {
		squash__image_spec__init(&specs[i]);
		specs[i].image = list->items[i].image;
		specs[i].target = list->items[i].target ? list->items[i].target : "";
		ptrs[i] = &specs[i];
	}
	mount.job_id = job_id;
	mount.uid = (uint32_t)uid;
	mount.has_step_id = true;
	mount.step_id = step_id;
	mount.n_images = list->count;
	mount.images = ptrs;
	req.op_case = SQUASH__REQUEST__OP_MOUNT_JOB;
	req.mount_job = &mount;
	if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
		gethostname(host, sizeof host - 1);
		snprintf(err, errlen, "cannot mount the step's images: squashd is not reachable: %s"
			 SQUASH_ASK_ADMIN, why, host);
	} else if (resp->status == SQUASH__STATUS__USER_ERROR) {
		snprintf(err, errlen, "%s", resp->message && *resp->message ? resp->message
									  : "refused, no reason given");
	} else if (resp->status != SQUASH__STATUS__OK) {
		gethostname(host, sizeof host - 1);
		snprintf(err, errlen, "cannot mount the step's images: %s" SQUASH_ASK_ADMIN,
			 resp->message && *resp->message ? resp->message : "no reason given", host);
	} else {
		step_mounted = true;
		mounted_job = job_id;
		mounted_step = step_id;
		info->has_step_id = true;
		info->step_id = step_id;
		/* Whether the allocation asked for images (then its prolog's
		 * record must be there; otherwise the step's are all there is). */
		inherited = step_env(sp, SQUASH_ENV_OPTION);
		info->has_job_without_images = true;
		info->job_without_images = !inherited;
		free(inherited);
		rc = 0;
	}
out:
	if (resp)
		squash__response__free_unpacked(resp, NULL);
	free(ptrs);
	free(specs);
	squash_imagespec_free(list);
	free(list);
	return rc;
}

void squash_step_images_release(const struct squash_settings *s)
{
	struct squash_client_options opts = squash_settings_client(s);
	Squash__ReleaseJobRequest release = SQUASH__RELEASE_JOB_REQUEST__INIT;
	Squash__Request req = SQUASH__REQUEST__INIT;
	Squash__Response *resp = NULL;
	char why[768];

	if (!step_mounted)
		return;
	step_mounted = false;
	release.job_id = mounted_job;
	release.has_step_id = true;
	release.step_id = mounted_step;
	req.op_case = SQUASH__REQUEST__OP_RELEASE_JOB;
	req.release_job = &release;
	if (squash_client_call_retry(&opts, &req, &resp, NULL, why, sizeof why) != 0) {
		slurm_error("squash: step %u.%u: cannot release the step's images: %s; squashd's "
			    "reconciliation with Slurm will", mounted_job, mounted_step, why);
		return;
	}
	if (resp->status != SQUASH__STATUS__OK)
		slurm_error("squash: step %u.%u: cannot release the step's images: squashd answered %s: %s",
			    mounted_job, mounted_step, squash_status_name(resp->status),
			    resp->message ? resp->message : "");
	squash__response__free_unpacked(resp, NULL);
}
