/* commands.h: the graft tool's subcommands, one file each. */
#ifndef GRAFT_CLI_COMMANDS_H
#define GRAFT_CLI_COMMANDS_H

int cmd_info(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_finetune(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_prune(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_devices(int argc, char **argv);
int cmd_bench(int argc, char **argv);

#endif
