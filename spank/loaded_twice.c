/* Recognising spank_squash.so loaded twice (see loaded_twice.h). */
#include "config.h"

#include "loaded_twice.h"

static bool init_running; /* a slurm_spank_init ran, its slurm_spank_exit not yet */
static bool prolog_ran, epilog_ran;

const char squash_loaded_twice_reason[] =
	"spank_squash.so is loaded twice: plugstack.conf names it on two lines, for "
	"example in /etc/slurm/plugstack.conf.d/squash.conf (installed by the package; "
	"plugstack.conf includes it) and in a 'required' line of plugstack.conf itself; "
	"remove one of them";

static bool seen_before(bool *ran)
{
	bool seen = *ran;

	*ran = true;
	return seen;
}

bool squash_init_seen_before(void)
{
	return seen_before(&init_running);
}

void squash_init_forget(void)
{
	init_running = false;
}

bool squash_prolog_seen_before(void)
{
	return seen_before(&prolog_ran);
}

bool squash_epilog_seen_before(void)
{
	return seen_before(&epilog_ran);
}
