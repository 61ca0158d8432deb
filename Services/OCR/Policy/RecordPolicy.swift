/// The thresholds a record's values are checked against, in one place for the service (`TemplateMatcher`) and the
/// gateway's help and prompts (`OCRCLI`), which links no OCR engine.
public enum RecordPolicy {
    /// Tesseract's word confidence under which a reading wants a look: right readings of the display photos
    /// (`Tests/DisplayPhotos`) mostly score 0.85 or more; misread digits (14.38 as 14.30, 5.51 as 9.01) 0.7–0.83.
    public static let minimumConfidence = 0.85
}
