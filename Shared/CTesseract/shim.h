// Leptonica (image I/O and processing) and Tesseract's C API in one Clang module, so that both see the
// same `struct Pix` and a Leptonica image can be handed to TessBaseAPISetImage2 without casts.
#include <leptonica/allheaders.h>
#include <tesseract/capi.h>
