/* temp_files.h: the temporaries of atomic writes ("<path>.tmp.XXXXXX", locked while written). */
#ifndef GRAFT_CORE_TEMP_FILES_H
#define GRAFT_CORE_TEMP_FILES_H

/* Remove the temporaries a killed writer of path left behind ("<path>.tmp.XXXXXX" whose writer
 * no longer holds their flock; a live writer's is kept). Returns how many were removed. A writer
 * holds an exclusive flock on its temporary from creation until rename. */
int temp_files_remove_stale(const char *path);

#endif
