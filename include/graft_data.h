/* graft_data.h: the data part of graft's public API (image loading and its options, GPU JPEG
 * decoding, text options, tokenizers, file lists, datasets); graft.h includes it, not for use on
 * its own. */
#ifndef GRAFT_DATA_H
#define GRAFT_DATA_H

#ifndef GRAFT_H
#error "include graft.h, which includes graft_data.h"
#endif

/* ---- Data: labelled folders and text ------------------------------------------------------- */

/* How images become input tensors (torchvision's semantics). */
typedef struct graft_image_options {
    int resize;  /* shorter side resized to this (0: no resize) */
    int crop;    /* center crop to crop x crop (0: none); training with augment uses a
                    random-resized-crop of this size instead */
    int augment; /* random-resized-crop + horizontal flip (training) */
    float scale_min, scale_max, ratio_min, ratio_max; /* random-resized-crop ranges */
    float mean[3], std[3];                            /* normalisation of pixel / 255 */
    int nhwc;                                         /* 1: (N, H, W, 3); 0: (N, 3, H, W) */
    graft_dtype dtype;      /* F32 or F16, or U8: the resized, cropped pixels, not normalised */
    int64_t max_pixels;     /* larger images are skipped (decompression bombs); 0: 178956970 */
    const char *input_name; /* the model input the images feed (default "input") */
    int grayscale; /* 1: one channel, PIL's convert("L"), normalised with mean[0], std[0] */
    /* 1: decode a JPEG at 1/2, 1/4 or 1/8 of its size (libjpeg's DCT scaling) when that keeps
     * its shorter side at least the resize target (the crop when augmenting): several times
     * faster on large photos, but not the pixels Pillow gives (it decodes at full size, then
     * resizes). 0 (the default): full size, as torchvision's ImageFolder with PIL. */
    int fast_decode;
} graft_image_options;
/* clang-format off */
#define GRAFT_IMAGE_OPTIONS_INIT \
    {256, 224, 0, 0.08f, 1.0f, 0.75f, 4.0f / 3.0f, {0.485f, 0.456f, 0.406f}, \
     {0.229f, 0.224f, 0.225f}, 0, GRAFT_DTYPE_F32, 0, "input", 0, 0}
/* clang-format on */

/* One image file as a model input: decoded, resized, center-cropped and normalised as the
 * options say (no augmentation), into dst: (3 or 1, crop, crop) of options->dtype, or HWC with
 * nhwc. dst_bytes is dst's size. */
GRAFT_API graft_status graft_image_load(graft_ctx *ctx, const char *path,
                                        const graft_image_options *options, void *dst,
                                        size_t dst_bytes);

/* Preprocessing a model asks for in its metadata_props, over the defaults in *options:
 * "graft.image.resize", "graft.image.crop", "graft.image.grayscale" (integers),
 * "graft.image.mean", "graft.image.std"
 * (three comma-separated numbers each); graft_image_options_to_model writes them, so an
 * exported model remembers how its inputs were made. A malformed entry is an error naming it. */
GRAFT_API graft_status graft_image_options_from_model(const graft_model *model,
                                                      graft_image_options *options);
GRAFT_API graft_status graft_image_options_to_model(graft_model *model,
                                                    const graft_image_options *options);

/* ---- GPU JPEG decoding --------------------------------------------------------------------- */

/* Batched JPEG decoding with nvJPEG on the model's GPU (on a CUDA stream of its own), writing model
 * inputs straight into device memory: what graft_image_load makes of the same file and options
 * (shorter side resized as Pillow does, center crop, (x / 255 - mean) / std in F32 or F16, NCHW
 * or NHWC; GRAFT_DTYPE_U8: the cropped pixels themselves), from pixels nvJPEG decodes (its IDCT
 * and chroma upsampling differ from libjpeg-turbo's by a unit or two; the resize, crop and
 * normalisation given the same pixels are bit-exact). Not supported (GRAFT_E_UNSUPPORTED):
 * augment, grayscale; fast_decode is ignored (full-size decoding). A model on the CPU, or a graft
 * built without nvJPEG, is GRAFT_E_UNSUPPORTED saying so. max_batch: the most images one call
 * takes (1..4096). */
typedef struct graft_jpeg_decoder graft_jpeg_decoder;
GRAFT_API graft_status graft_jpeg_decoder_create(graft_model *model,
                                                 const graft_image_options *options, int max_batch,
                                                 graft_jpeg_decoder **out);
/* graft_jpeg_decoder_create for another thread than the model's: the same decoder, its error
 * message (if any) written into error (error_size bytes) instead of the model's context, so it
 * may start (nvJPEG's handles and engines take most of a second) while the model runs. */
GRAFT_API graft_status graft_jpeg_decoder_open(graft_model *model,
                                               const graft_image_options *options, int max_batch,
                                               char *error, size_t error_size,
                                               graft_jpeg_decoder **out);
/* n images (data[i], lengths[i] bytes, host memory, free to change when the call returns) into
 * dst: device memory on the model's GPU of n * (3 * crop * crop) elements of options->dtype,
 * complete when the call returns. The decoder keeps its own error state (graft_jpeg_decoder_error,
 * not the model's context) and stream, so one thread may decode the next batch while another
 * runs the model on the last one (not on the same dst). decoded (n, host): 1 when image i was
 * written, 0 when not (not a JPEG, corrupt or truncated, an EXIF orientation other than 1, CMYK,
 * over max_pixels, a kind neither nvJPEG backend takes): dst's slot i is then untouched; decode
 * those on the CPU (graft_image_load). 2 when the decoder's CPU threads decoded it
 * (graft_jpeg_decoder_set_cpu_threads). n > max_batch is an error; n == 0 does nothing. */
GRAFT_API graft_status graft_jpeg_decode_batch(graft_jpeg_decoder *d,
                                               const unsigned char *const *data,
                                               const size_t *lengths, int n, void *dst,
                                               unsigned char *decoded);
/* threads CPU threads (libjpeg-turbo) decode a share of every batch beside nvJPEG, on the
 * calling thread's OpenMP team: nvJPEG takes the batch's first images, the threads the rest
 * (and the calling thread joins them when nvJPEG's share is done), the split following both
 * sides' measured images/s from batch to batch. Their images are graft_image_load's pixels
 * exactly (decoded[i] 2), nvJPEG's differ from those by its IDCT's rounding, so which images a
 * batch decodes where changes its results by that much. 0 (the default): nvJPEG alone;
 * 0..1024. */
GRAFT_API graft_status graft_jpeg_decoder_set_cpu_threads(graft_jpeg_decoder *d, int threads);
/* "hardware" (the GPU's JPEG engines, e.g. A100, H100, H200) or "gpu" (nvJPEG's GPU/hybrid
 * decoder, where there are no engines); images the hardware does not take (progressive, ...) go
 * through the "gpu" decoder either way. */
GRAFT_API const char *graft_jpeg_decoder_backend(const graft_jpeg_decoder *d);
/* The message of the decoder's last failed graft_jpeg_decode_batch ("" after a success). */
GRAFT_API const char *graft_jpeg_decoder_error(const graft_jpeg_decoder *d);
GRAFT_API void graft_jpeg_decoder_free(graft_jpeg_decoder *d);

/* How text becomes token ids (BERT's inputs). */
typedef struct graft_text_options {
    const char *vocab_path; /* BERT vocab.txt, or a Hugging Face tokenizer.json */
    int cased;              /* 0: lower-case and strip accents (uncased vocab.txt; a
                               tokenizer.json normalizes as it says) */
    int max_len;            /* truncate/pad to this many tokens, [CLS] and [SEP] included */
    const char *text_column, *text_pair_column, *label_column; /* CSV/TSV columns */
    char label_separator; /* several labels in one field (multi-label); 0: one label */
    int regression;       /* the label column holds numbers */
    int pad_to_longest;   /* 1: pad each batch to its longest text, not to max_len */
    /* The tokenizer's bytes in memory (vocab_size bytes, copied; what
     * graft_tokenizer_load_memory takes), used instead of vocab_path when not NULL, e.g. the
     * one a model carries (see README, "text models"). */
    const char *vocab_data;
    size_t vocab_size;
    /* Rows this many tokens wide when more than max_len (texts still cut at max_len, the rest
     * [PAD] with mask 0): for a model whose inputs take exactly pad_len tokens. 0: max_len. */
    int pad_len;
} graft_text_options;
#define GRAFT_TEXT_OPTIONS_INIT                                                                    \
    { NULL, 0, 128, "text", NULL, "label", 0, 0, 0, NULL, 0, 0 }

/* A tokenizer: BERT's WordPiece over a vocab.txt (cased or not), or a Hugging Face tokenizer.json
 * (WordPiece, byte-level BPE, Unigram or WordLevel, with its normalizer, pre-tokenizer, added
 * tokens and post-processor; `cased` does not apply: the file says how it normalizes). The file's
 * content decides: a JSON object with a "model" member is a tokenizer.json. A component graft
 * does not implement is GRAFT_E_INVALID_ARGUMENT naming it (see docs/data.md). Ids equal Hugging
 * Face's: "[CLS] a [SEP]" or "[CLS] a [SEP] b [SEP]" for a vocab.txt (b NULL or "" for single
 * texts), the post-processor's template for a tokenizer.json ("<s> a </s>" for RoBERTa);
 * truncated to max_len tokens, special tokens included (0: no limit; pairs cut 'longest_first'),
 * padded to max_len with the padding token when pad is set. ids, type_ids and mask are caller
 * buffers of cap entries; *len gets the length before padding. Invalid UTF-8 is
 * GRAFT_E_INVALID_ARGUMENT naming the byte offset. A loaded tokenizer is read-only: threads may
 * share it. */
typedef struct graft_tokenizer graft_tokenizer;
GRAFT_API graft_status graft_tokenizer_load(graft_ctx *ctx, const char *vocab_path, int cased,
                                            graft_tokenizer **out);
GRAFT_API graft_status graft_tokenizer_encode(graft_ctx *ctx, const graft_tokenizer *tok,
                                              const char *a, const char *b, int max_len, int pad,
                                              int64_t *ids, int64_t *type_ids, int64_t *mask,
                                              size_t cap, size_t *len);
/* The same from bytes in memory (copied): a vocab.txt's or tokenizer.json's text, a SentencePiece
 * .model's bytes, or vocab.json + merges.txt as the JSON object {"vocab.json": {token: id, ...},
 * "merges.txt": "the file's text"} (what graft_tokenizer_data gives for them). */
GRAFT_API graft_status graft_tokenizer_load_memory(graft_ctx *ctx, const char *vocab, size_t size,
                                                   int cased, graft_tokenizer **out);
/* The id of a token exactly as the vocabulary writes it ("[CLS]"), or -1. */
GRAFT_API int64_t graft_tokenizer_token_id(const graft_tokenizer *tok, const char *token);
GRAFT_API void graft_tokenizer_free(graft_tokenizer *tok);
/* The vocabulary's size: token ids run from 0 to this minus 1. */
GRAFT_API int64_t graft_tokenizer_vocab_size(const graft_tokenizer *tok);
/* The special tokens a text model is trained with, by role. */
typedef enum graft_token_role {
    GRAFT_TOKEN_CLS, /* starts a text: [CLS], <s> (the post-processor's first special token) */
    GRAFT_TOKEN_SEP, /* ends one: [SEP], </s> */
    GRAFT_TOKEN_PAD, /* fills padding: [PAD], <pad> (tokenizer.json: its padding's pad_id) */
    GRAFT_TOKEN_UNK, /* the model's unknown token */
    GRAFT_TOKEN_ROLE_COUNT
} graft_token_role;
/* The id of the token with that role, or -1 when the tokenizer has none. */
GRAFT_API int64_t graft_tokenizer_special_id(const graft_tokenizer *tok, graft_token_role role);
/* The text of an id as the vocabulary writes it (owned by tok), or NULL when out of range. */
GRAFT_API const char *graft_tokenizer_token(const graft_tokenizer *tok, int64_t id);
/* What tok came from: 0 a vocab.txt, 1 a tokenizer.json, 2 vocab.json + merges.txt, 3 a
 * SentencePiece .model. */
GRAFT_API int graft_tokenizer_is_json(const graft_tokenizer *tok);
/* The bytes graft_tokenizer_load_memory builds tok again from (owned by tok, NUL-terminated,
 * *size bytes before the NUL): the file's bytes, or for vocab.json + merges.txt the JSON object
 * above. Text for kinds 0 to 2 (is_json), binary for a .model. */
GRAFT_API const char *graft_tokenizer_data(const graft_tokenizer *tok, size_t *size);

/* The image files under a folder, found as torchvision's ImageFolder finds them: recursively,
 * links followed, files whose names end (in any case) in .jpg .jpeg .png .ppm .bmp .pgm .tif
 * .tiff or .webp; other regular files are ignored, and so are names starting with '.' (hidden
 * files and folders). Order: by folder path, then by name within a folder (sorted(os.walk)).
 * JPEG and PNG files are listed. Every entry left out otherwise is a note with its reason:
 * skipped = 1 for the other image formats (unless their content is JPEG or PNG), dangling links,
 * unreadable entries and what is neither a regular file nor a folder (a FIFO, a socket, a
 * device: never opened); skipped = 0 for a repeat, where nothing is lost: a folder reached again
 * (its device and inode already listed: a link loop, a link to '.') is not entered again, a
 * file reached again (a link or hard link to a listed file) is not listed again. An unreadable
 * DIR, folders nested more than 64 deep and more than 10 million entries are errors. */
typedef struct graft_file_list graft_file_list;
GRAFT_API graft_status graft_image_files(graft_ctx *ctx, const char *dir, graft_file_list **out);
/* The .txt files (any case) under a folder by the same rules, in depth-first order of sorted
 * names (a folder's entries by name, each subfolder's files where its name falls). */
GRAFT_API graft_status graft_text_files(graft_ctx *ctx, const char *dir, graft_file_list **out);
GRAFT_API int64_t graft_file_list_count(const graft_file_list *list);
GRAFT_API const char *graft_file_list_path(const graft_file_list *list, int64_t index);
GRAFT_API int64_t graft_file_list_note_count(const graft_file_list *list);
GRAFT_API graft_status graft_file_list_note(const graft_file_list *list, int64_t index,
                                            const char **path, const char **reason, int *skipped);
GRAFT_API void graft_file_list_free(graft_file_list *list);

/* Unlabelled texts, e.g. to classify: the text column of a .csv (comma) or .tsv (tab) file, read
 * as graft_dataset_open_text reads a labelled one (the header names the column; a record that is
 * not valid UTF-8, holds a NUL byte, has another field count than the header or an empty text is
 * skipped and listed with its line). A missing file or column is an error naming it. */
typedef struct graft_text_list graft_text_list;
GRAFT_API graft_status graft_text_list_open_csv(graft_ctx *ctx, const char *path,
                                                const char *text_column, graft_text_list **out);
GRAFT_API void graft_text_list_free(graft_text_list *list);
GRAFT_API int64_t graft_text_list_count(const graft_text_list *list);
/* Text `index` (NULL out of range) and the line its record starts on (1-based). */
GRAFT_API const char *graft_text_list_text(const graft_text_list *list, int64_t index);
GRAFT_API int64_t graft_text_list_line(const graft_text_list *list, int64_t index);
GRAFT_API int64_t graft_text_list_skipped_count(const graft_text_list *list);
GRAFT_API graft_status graft_text_list_skipped(const graft_text_list *list, int64_t index,
                                               int64_t *line, const char **reason);

/* A labelled data set: an image folder (DIR/<class>/.../<image>: the files graft_image_files
 * lists under each class folder), a text folder (DIR/<class>/<n>.txt) or a CSV/TSV file with
 * text and label columns. Classes are sorted by name (hidden folders are not classes). Files
 * that cannot be read are skipped, counted and listed (graft_dataset_skipped), image files in
 * formats graft does not decode among them; a class folder without images is an error before
 * any work starts. */
typedef struct graft_dataset graft_dataset;

GRAFT_API graft_status graft_dataset_open_images(graft_ctx *ctx, const char *dir,
                                                 const graft_image_options *options,
                                                 graft_dataset **out);
GRAFT_API graft_status graft_dataset_open_text(graft_ctx *ctx, const char *path,
                                               const graft_text_options *options,
                                               graft_dataset **out);
GRAFT_API void graft_dataset_free(graft_dataset *ds);
GRAFT_API int64_t graft_dataset_size(const graft_dataset *ds);
GRAFT_API int graft_dataset_class_count(const graft_dataset *ds);
GRAFT_API const char *graft_dataset_class_name(const graft_dataset *ds, int index);
/* Files skipped so far (at open, and while reading): path and reason. */
/* The file sample `index` of this data set (or view) comes from (a CSV/TSV row: "FILE:LINE"),
 * NULL when out of range; valid while ds lives. */
GRAFT_API const char *graft_dataset_sample_path(const graft_dataset *ds, int64_t index);
GRAFT_API int64_t graft_dataset_skipped_count(const graft_dataset *ds);
GRAFT_API graft_status graft_dataset_skipped(const graft_dataset *ds, int64_t index,
                                             const char **path, const char **reason);
/* A seeded, stratified split into training and validation parts (new handles). */
GRAFT_API graft_status graft_dataset_split(graft_dataset *ds, double val_fraction, uint64_t seed,
                                           graft_dataset **train, graft_dataset **val);
/* Order the samples of a text data set padded per batch (graft_text_options.pad_to_longest) by
 * their token count, shortest first (ties keep their order), so that each batch holds texts of
 * like length and runs little padding. Tokenizes every text once (on `threads` threads, 0: all
 * cores); call it before graft_dataset_source. A trainer's results do not depend on the order
 * beyond its data order (which the trainer draws by sample index); the feature cache keys on it.
 */
GRAFT_API graft_status graft_dataset_sort_by_length(graft_dataset *ds, int threads);
/* The same classes from another folder, e.g. a separate validation folder; a class it has that
 * `like` lacks is an error. */
GRAFT_API graft_status graft_dataset_open_like(const graft_dataset *like, const char *path,
                                               graft_dataset **out);
/* Name the batches' inputs as a model takes them: names[k] for input k (n: as many as the data
 * set makes: an image data set makes 1, the images; a text data set 3, in GRAFT_TEXT_INPUT_*
 * order: ids, mask, type ids, see graft_model_text_inputs), NULL to leave input k out (a model
 * without type ids). Shared by the data set's views (graft_dataset_split) and copied by
 * graft_dataset_open_like; applies to sources made after the call. */
GRAFT_API graft_status graft_dataset_set_input_names(graft_dataset *ds, const char *const *names,
                                                     int n);
/* Batch buffers from the caller's allocator (e.g. pinned host memory for GPU transfers) instead
 * of malloc; applies to sources made after the call. NULL functions restore malloc/free. */
GRAFT_API graft_status graft_dataset_set_allocator(graft_dataset *ds,
                                                   void *(*alloc)(void *user, size_t bytes),
                                                   void (*release)(void *user, void *ptr),
                                                   void *user);
/* A batch source over the data set for the trainer: `threads` decoding threads (0: all cores),
 * `prefetch` batches ready ahead; augmentation draws from `seed`. The source stays valid while
 * ds lives, until the next call for ds makes another (a data set has one source at a time; open
 * the folder again for a second); a source's samples come out in the data set's order whatever
 * the thread count. */
GRAFT_API graft_status graft_dataset_source(graft_dataset *ds, int threads, int prefetch,
                                            uint64_t seed, graft_batch_source *out);
#endif /* GRAFT_DATA_H */
