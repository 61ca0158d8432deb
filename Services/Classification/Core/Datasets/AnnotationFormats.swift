import Base
import Foundation

/// How a detection dataset's boxes are written when it is uploaded. Each format is parsed into `AnnotatedImage`s
/// in its own convention and converted once, in `DatasetBuilder.detection`, to the service's one convention: `Box`
/// in pixels of the upright image, origin top-left, `x`/`y` the top-left corner (README, "Boxes").
public enum AnnotationFormat: String, Sendable, CaseIterable {
    /// Create ML's `annotations.json`: an array of `{image, annotations: [{label, coordinates: {x, y, width, height}}]}`,
    /// x and y the box centre in pixels.
    case createML = "createml"
    /// YOLO's files: `images/…` with `labels/<same path>.txt` (`class cx cy w h`, normalised to 0–1) and class names
    /// from a `*.yaml` (`names:`) or `classes.txt`.
    case yolo
    /// COCO's instances JSON: `images`, `annotations` with `bbox` [x, y, width, height] (top-left corner, pixels),
    /// `categories`.
    case coco

    /// The format of an upload that did not say: JSON that is an object is COCO's, an array Create ML's, and no JSON
    /// at all means YOLO's label files.
    public static func detect(annotations: [UInt8]) -> AnnotationFormat {
        switch annotations.first(where: { ![0x20, 0x09, 0x0A, 0x0D, 0xEF, 0xBB, 0xBF].contains($0) }) {
        case nil: .yolo
        case UInt8(ascii: "{"): .coco
        default: .createML
        }
    }

    /// Whether a file of a YOLO upload is one of its text files — a label file under `labels/`, the `*.yaml` or the
    /// `classes.txt` — kept as it is rather than decoded as an image.
    public static func isYOLOTextFile(_ path: String) -> Bool {
        YOLOAnnotations.isLabelFile(path) || ["yaml", "yml"].contains((path as NSString).pathExtension.lowercased())
            || (path as NSString).lastPathComponent == "classes.txt"
    }
}

/// One box as its format states it, before it is checked against its image.
struct SourceBox {
    enum Coordinates {
        /// Pixels of the upright image, origin top-left.
        case pixels(Box)
        /// YOLO's centre and size as fractions of the image's width and height.
        case normalised(centerX: Double, centerY: Double, width: Double, height: Double)
    }

    var label: String
    var coordinates: Coordinates
    /// Where the box was written (`labels/a.txt line 3`, `annotations[7].bbox`): errors name it.
    var field: String
}

/// One image of a detection upload and its boxes as a format states them.
struct AnnotatedImage {
    /// The name the annotations give the image (the sample's name).
    var name: String
    /// The uploaded file's path (key into the upload's files).
    var file: String
    var boxes: [SourceBox]
    /// The size the annotations declare for the image (COCO's `width`/`height`), checked against the decoded image.
    var declaredSize: (width: Int, height: Int, field: String)?
}

// MARK: - Create ML

enum CreateMLAnnotations {
    static func parse(_ json: [UInt8], files: [String: [UInt8]], skipped: Set<String>) throws -> [AnnotatedImage] {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: Data(json))
        } catch {
            throw ClassificationError.invalid("annotations.json: malformed JSON (\(error.localizedDescription))")
        }
        guard let entries = root as? [Any] else {
            throw ClassificationError.invalid(
                "annotations.json: the top level must be an array of {image, annotations}")
        }
        var images: [AnnotatedImage] = []
        var seenNames: Set<String> = []
        for (index, entry) in entries.enumerated() {
            guard let object = entry as? [String: Any] else {
                throw ClassificationError.invalid("annotations.json[\(index)]: not an object")
            }
            guard let name = object["image"] as? String, !name.isEmpty else {
                throw ClassificationError.invalid("annotations.json[\(index)].image: missing or not a string")
            }
            guard seenNames.insert(name).inserted else {
                throw ClassificationError.invalid("\(name): annotated twice in annotations.json")
            }
            guard let annotations = object["annotations"] as? [Any] else {
                throw ClassificationError.invalid("\(name).annotations: missing or not an array")
            }
            let key = files[name] != nil ? name : (name as NSString).lastPathComponent
            if skipped.contains(name) || skipped.contains(key) { continue }
            guard files[key] != nil else {
                throw ClassificationError.invalid("\(name): named in annotations.json but not uploaded")
            }
            var boxes: [SourceBox] = []
            for (a, annotation) in annotations.enumerated() {
                let field = "\(name).annotations[\(a)]"
                guard let annotation = annotation as? [String: Any] else {
                    throw ClassificationError.invalid("\(field): not an object")
                }
                guard let label = annotation["label"] as? String, !label.isEmpty else {
                    throw ClassificationError.invalid("\(field).label: missing or not a string")
                }
                guard let coordinates = annotation["coordinates"] as? [String: Any] else {
                    throw ClassificationError.invalid("\(field).coordinates: missing or not an object")
                }
                var values: [String: Double] = [:]
                for key in ["x", "y", "width", "height"] {
                    guard let number = JSONNumber.double(coordinates[key]) else {
                        throw ClassificationError.invalid("\(field).coordinates.\(key): missing or not a number")
                    }
                    values[key] = number
                }
                let box = Box(
                    centerX: values["x"]!, centerY: values["y"]!, width: values["width"]!, height: values["height"]!)
                boxes.append(SourceBox(label: label, coordinates: .pixels(box), field: "\(field).coordinates"))
            }
            images.append(AnnotatedImage(name: name, file: key, boxes: boxes))
        }
        return images
    }
}

// MARK: - COCO

enum COCOAnnotations {
    /// What errors call the JSON (the upload carries its bytes, not its file name).
    static let source = "COCO annotations"

    static func parse(_ json: [UInt8], files: [String: [UInt8]], skipped: Set<String>) throws -> [AnnotatedImage] {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: Data(json))
        } catch {
            throw ClassificationError.invalid("\(source): malformed JSON (\(error.localizedDescription))")
        }
        guard let object = root as? [String: Any] else {
            throw ClassificationError.invalid(
                "\(source): the top level must be an object with images, annotations and categories")
        }
        func array(_ key: String) throws -> [Any] {
            guard let value = object[key] as? [Any] else {
                throw ClassificationError.invalid("\(source).\(key): missing or not an array")
            }
            return value
        }
        func entry(_ value: Any, _ field: String) throws -> [String: Any] {
            guard let entry = value as? [String: Any] else {
                throw ClassificationError.invalid("\(source).\(field): not an object")
            }
            return entry
        }
        func identifier(_ entry: [String: Any], _ key: String, _ field: String) throws -> Int {
            guard let value = JSONNumber.integer(entry[key]) else {
                throw ClassificationError.invalid("\(source).\(field).\(key): missing or not an integer")
            }
            return value
        }

        var categories: [Int: String] = [:]
        for (index, value) in try array("categories").enumerated() {
            let field = "categories[\(index)]"
            let category = try entry(value, field)
            let id = try identifier(category, "id", field)
            guard let name = category["name"] as? String, !name.isEmpty else {
                throw ClassificationError.invalid("\(source).\(field).name: missing or not a string")
            }
            guard categories.updateValue(name, forKey: id) == nil else {
                throw ClassificationError.invalid("\(source).\(field).id: \(id) is given to two categories")
            }
        }

        var images: [AnnotatedImage] = []
        var imageIndex: [Int: Int] = [:]
        var seenFiles: Set<String> = []
        for (index, value) in try array("images").enumerated() {
            let field = "images[\(index)]"
            let image = try entry(value, field)
            let id = try identifier(image, "id", field)
            guard let name = image["file_name"] as? String, !name.isEmpty else {
                throw ClassificationError.invalid("\(source).\(field).file_name: missing or not a string")
            }
            guard imageIndex[id] == nil else {
                throw ClassificationError.invalid("\(source).\(field).id: \(id) is given to two images")
            }
            guard seenFiles.insert(name).inserted else {
                throw ClassificationError.invalid("\(source).\(field).file_name: \(name) is listed twice")
            }
            var declared: (width: Int, height: Int, field: String)?
            if image["width"] != nil || image["height"] != nil {
                guard let width = JSONNumber.integer(image["width"]), let height = JSONNumber.integer(image["height"]),
                    width > 0, height > 0
                else {
                    throw ClassificationError.invalid("\(source).\(field): width and height must be positive integers")
                }
                declared = (width, height, "\(source).\(field) (\(name))")
            }
            let key = files[name] != nil ? name : (name as NSString).lastPathComponent
            if skipped.contains(name) || skipped.contains(key) {
                imageIndex[id] = -1  // left out under skip_bad: its annotations go with it
                continue
            }
            guard files[key] != nil else {
                throw ClassificationError.invalid("\(name): named in \(source).\(field).file_name but not uploaded")
            }
            imageIndex[id] = images.count
            images.append(AnnotatedImage(name: name, file: key, boxes: [], declaredSize: declared))
        }

        for (index, value) in try array("annotations").enumerated() {
            let field = "annotations[\(index)]"
            let annotation = try entry(value, field)
            let imageID = try identifier(annotation, "image_id", field)
            guard let position = imageIndex[imageID] else {
                throw ClassificationError.invalid(
                    "\(source).\(field).image_id: \(imageID) is not the id of any of the images")
            }
            let categoryID = try identifier(annotation, "category_id", field)
            guard let label = categories[categoryID] else {
                throw ClassificationError.invalid(
                    "\(source).\(field).category_id: \(categoryID) is not the id of any of the categories")
            }
            guard let bbox = annotation["bbox"] as? [Any], bbox.count == 4 else {
                throw ClassificationError.invalid(
                    "\(source).\(field).bbox: missing or not 4 numbers [x, y, width, height]")
            }
            let numbers = bbox.compactMap { JSONNumber.double($0) }
            guard numbers.count == 4 else {
                throw ClassificationError.invalid("\(source).\(field).bbox: [x, y, width, height] must all be numbers")
            }
            guard position >= 0 else { continue }
            let box = Box(x: numbers[0], y: numbers[1], width: numbers[2], height: numbers[3])
            images[position].boxes.append(
                SourceBox(
                    label: label, coordinates: .pixels(box), field: "\(source).\(field).bbox (\(images[position].name))"
                ))
        }
        return images
    }
}

// MARK: - YOLO

enum YOLOAnnotations {
    /// The images of a YOLO upload and their boxes from `labels/…txt`; `files` holds every uploaded file (images,
    /// label files, the class names). An image without a label file has no objects (Ultralytics' background images).
    static func parse(files: [String: [UInt8]], skipped: Set<String>) throws -> [AnnotatedImage] {
        let names = try classNames(files)
        var images: [AnnotatedImage] = []
        var labelFilesUsed: Set<String> = []
        for path in files.keys.sorted() where DatasetBuilder.isImageName(path) {
            guard let labelPath = labelPath(forImage: path) else {
                throw ClassificationError.invalid(
                    "\(path): a YOLO image must be inside an images/ folder (its boxes in labels/)")
            }
            labelFilesUsed.insert(labelPath)
            var image = AnnotatedImage(name: path, file: path, boxes: [])
            if let text = files[labelPath] {
                image.boxes = try boxes(in: text, file: labelPath, names: names)
            }
            images.append(image)
        }
        for path in files.keys.sorted() where isLabelFile(path) && !labelFilesUsed.contains(path) {
            // Its image was left out as bad under skip_bad: the label file goes with it.
            if skipped.contains(where: { labelPath(forImage: $0) == path }) { continue }
            throw ClassificationError.invalid(
                "\(path): a label file without its image (expected \(imageStem(forLabel: path)).png, .jpg, .jpeg, .webp or .heic)"
            )
        }
        guard !images.isEmpty else {
            throw ClassificationError.invalid(
                "no images: YOLO's images go under an images/ folder, their boxes under labels/")
        }
        return images
    }

    /// Ultralytics' rule: the last `images/` folder of the path becomes `labels/` and the extension `.txt`.
    static func labelPath(forImage path: String) -> String? {
        var parts = path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        guard let folder = parts.dropLast().lastIndex(of: "images") else { return nil }
        parts[folder] = "labels"
        parts[parts.count - 1] = (parts[parts.count - 1] as NSString).deletingPathExtension + ".txt"
        return parts.joined(separator: "/")
    }

    static func isLabelFile(_ path: String) -> Bool {
        let parts = path.split(separator: "/").map(String.init)
        return (path as NSString).pathExtension.lowercased() == "txt" && parts.dropLast().contains("labels")
            && parts.last != "classes.txt"
    }

    static func imageStem(forLabel path: String) -> String {
        var parts = path.split(separator: "/").map(String.init)
        if let folder = parts.dropLast().lastIndex(of: "labels") { parts[folder] = "images" }
        parts[parts.count - 1] = (parts[parts.count - 1] as NSString).deletingPathExtension
        return parts.joined(separator: "/")
    }

    /// The boxes of one label file: one `class cx cy w h` line per box, blank lines ignored.
    static func boxes(in bytes: [UInt8], file: String, names: ClassNames) throws -> [SourceBox] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ClassificationError.invalid("\(file): not UTF-8 text")
        }
        var boxes: [SourceBox] = []
        for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            if fields.isEmpty { continue }
            let place = "\(file) line \(index + 1)"
            guard fields.count == 5 else {
                throw ClassificationError.invalid(
                    "\(place): 5 values expected (class cx cy w h), found \(fields.count)\(fields.count > 5 ? " (segmentation polygons are not read)" : "")"
                )
            }
            guard let classIndex = Int(fields[0]) else {
                throw ClassificationError.invalid("\(place): class \"\(fields[0])\" is not an integer")
            }
            guard names.names.indices.contains(classIndex) else {
                throw ClassificationError.invalid(
                    "\(place): class \(classIndex) is out of range: \(names.source) names \(names.names.count) classes (0–\(names.names.count - 1))"
                )
            }
            var values: [Double] = []
            for (field, name) in zip(fields.dropFirst(), ["cx", "cy", "w", "h"]) {
                guard let value = Double(field), value.isFinite else {
                    throw ClassificationError.invalid("\(place): \(name) \"\(field)\" is not a number")
                }
                values.append(value)
            }
            boxes.append(
                SourceBox(
                    label: names.names[classIndex],
                    coordinates: .normalised(
                        centerX: values[0], centerY: values[1], width: values[2], height: values[3]),
                    field: "\(place) (cx cy w h)"))
        }
        return boxes
    }

    struct ClassNames {
        var names: [String]
        /// The file they came from.
        var source: String
    }

    /// The class names from the upload's one `*.yaml` (`names:`) or `classes.txt`; both given must agree.
    static func classNames(_ files: [String: [UInt8]]) throws -> ClassNames {
        let yamls = files.keys.filter { ["yaml", "yml"].contains(($0 as NSString).pathExtension.lowercased()) }.sorted()
        let texts = files.keys.filter { ($0 as NSString).lastPathComponent == "classes.txt" }.sorted()
        guard yamls.count <= 1 else {
            throw ClassificationError.invalid(
                "\(yamls.joined(separator: ", ")): one YAML file names the classes; found \(yamls.count)")
        }
        guard texts.count <= 1 else {
            throw ClassificationError.invalid(
                "\(texts.joined(separator: ", ")): one classes.txt names the classes; found \(texts.count)")
        }
        var found: [ClassNames] = []
        if let path = yamls.first {
            found.append(ClassNames(names: try YAMLClassNames.parse(files[path]!, file: path), source: path))
        }
        if let path = texts.first {
            guard let text = String(validating: files[path]!, as: UTF8.self) else {
                throw ClassificationError.invalid("\(path): not UTF-8 text")
            }
            let names = text.split(separator: "\n", omittingEmptySubsequences: false)
                .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
            let used = Array(names.reversed().drop(while: \.isEmpty).reversed())  // trailing blank lines are no classes
            if let blank = used.firstIndex(of: "") {
                throw ClassificationError.invalid("\(path) line \(blank + 1): an empty class name")
            }
            guard !used.isEmpty else { throw ClassificationError.invalid("\(path): names no classes") }
            found.append(ClassNames(names: used, source: path))
        }
        guard let first = found.first else {
            throw ClassificationError.invalid(
                "YOLO annotations need their class names: a data.yaml with names: or a classes.txt with one name a line"
            )
        }
        if found.count == 2, found[0].names != found[1].names {
            throw ClassificationError.invalid(
                "\(found[0].source) and \(found[1].source) name different classes (\(found[0].names.joined(separator: ", ")) against \(found[1].names.joined(separator: ", ")))"
            )
        }
        for (index, name) in first.names.enumerated() where first.names[..<index].contains(name) {
            throw ClassificationError.invalid("\(first.source): class \(name) is named twice")
        }
        return first
    }
}

/// Reads the `names:` of an Ultralytics data YAML (and checks `nc:` against it) without a YAML library: a flow
/// list `[a, b]`, a block list of `- a` lines, or a map `{0: a, 1: b}` / `0: a` lines, the indices 0…n−1.
enum YAMLClassNames {
    static func parse(_ bytes: [UInt8], file: String) throws -> [String] {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw ClassificationError.invalid("\(file): not UTF-8 text")
        }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map {
            String($0).replacingOccurrences(of: "\r", with: "")
        }
        var declaredCount: Int?
        var names: [String]?
        var index = 0
        while index < lines.count {
            let line = stripComment(lines[index])
            index += 1
            guard !line.hasPrefix(" "), !line.hasPrefix("\t"), let colon = line.firstIndex(of: ":") else { continue }
            let key = line[..<colon].trimmingCharacters(in: .whitespaces)
            let rest = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if key == "nc" {
                guard let count = Int(rest) else {
                    throw ClassificationError.invalid("\(file) line \(index): nc \"\(rest)\" is not an integer")
                }
                declaredCount = count
            } else if key == "names" {
                if !rest.isEmpty {
                    // A flow collection may continue on the following lines until its bracket closes.
                    var value = rest
                    let first = index
                    while let open = value.first, open == "[" || open == "{", !value.hasSuffix(open == "[" ? "]" : "}"),
                        index < lines.count
                    {
                        value += " " + stripComment(lines[index]).trimmingCharacters(in: .whitespaces)
                        index += 1
                    }
                    names = try flow(value, file: file, line: first)
                } else {
                    var block: [(line: Int, text: String)] = []
                    while index < lines.count {
                        let inner = stripComment(lines[index])
                        if inner.trimmingCharacters(in: .whitespaces).isEmpty {
                            index += 1
                            continue
                        }
                        guard inner.hasPrefix(" ") || inner.hasPrefix("\t") || inner.hasPrefix("-") else { break }
                        block.append((index + 1, inner.trimmingCharacters(in: .whitespaces)))
                        index += 1
                    }
                    names = try blockNames(block, file: file)
                }
            }
        }
        guard let names else { throw ClassificationError.invalid("\(file): no names: (the class names) found") }
        guard !names.isEmpty else { throw ClassificationError.invalid("\(file): names: lists no classes") }
        if let declaredCount, declaredCount != names.count {
            throw ClassificationError.invalid("\(file): nc is \(declaredCount) but names: lists \(names.count) classes")
        }
        if let empty = names.firstIndex(of: "") {
            throw ClassificationError.invalid("\(file): class \(empty) has an empty name")
        }
        return names
    }

    /// The line without its comment: a `#` at the start or after white space, outside quotes.
    static func stripComment(_ line: String) -> String {
        var quote: Character?
        var previous: Character = " "
        for (offset, character) in line.enumerated() {
            defer { previous = character }
            if let open = quote {
                if character == open { quote = nil }
            } else if character == "'" || character == "\"" {
                quote = character
            } else if character == "#", previous == " " || previous == "\t" {
                return String(line.prefix(offset))
            }
        }
        return line
    }

    static func unquote(_ value: String) -> String {
        let trimmed = value.trimmingCharacters(in: .whitespaces)
        if trimmed.count >= 2, let first = trimmed.first, first == "'" || first == "\"", trimmed.last == first {
            return String(trimmed.dropFirst().dropLast())
        }
        return trimmed
    }

    /// Splits a flow collection's items at top-level commas (commas inside quotes stay).
    static func items(_ body: Substring) -> [String] {
        var items: [String] = []
        var current = ""
        var quote: Character?
        for character in body {
            if let open = quote {
                if character == open { quote = nil }
                current.append(character)
            } else if character == "'" || character == "\"" {
                quote = character
                current.append(character)
            } else if character == "," {
                items.append(current)
                current = ""
            } else {
                current.append(character)
            }
        }
        if !current.trimmingCharacters(in: .whitespaces).isEmpty { items.append(current) }
        return items
    }

    static func flow(_ value: String, file: String, line: Int) throws -> [String] {
        if value.hasPrefix("["), value.hasSuffix("]") {
            return items(value.dropFirst().dropLast()).map(unquote)
        }
        if value.hasPrefix("{"), value.hasSuffix("}") {
            return try indexed(items(value.dropFirst().dropLast()).map { (line, $0) }, file: file)
        }
        throw ClassificationError.invalid("\(file) line \(line): names: must be a list [a, b] or a map {0: a, 1: b}")
    }

    static func blockNames(_ block: [(line: Int, text: String)], file: String) throws -> [String] {
        guard let first = block.first else { throw ClassificationError.invalid("\(file): names: lists no classes") }
        if first.text.hasPrefix("-") {
            return try block.map { entry in
                guard entry.text.hasPrefix("-") else {
                    throw ClassificationError.invalid(
                        "\(file) line \(entry.line): a list item (- name) expected under names:")
                }
                return unquote(String(entry.text.dropFirst()))
            }
        }
        return try indexed(block.map { ($0.line, $0.text) }, file: file)
    }

    /// `index: name` pairs, which must number the classes 0…n−1.
    static func indexed(_ pairs: [(line: Int, text: String)], file: String) throws -> [String] {
        var byIndex: [Int: String] = [:]
        for (line, text) in pairs {
            guard let colon = text.firstIndex(of: ":"), let index = Int(unquote(String(text[..<colon]))) else {
                throw ClassificationError.invalid(
                    "\(file) line \(line): \"\(text.trimmingCharacters(in: .whitespaces))\" is not index: name")
            }
            guard byIndex.updateValue(unquote(String(text[text.index(after: colon)...])), forKey: index) == nil else {
                throw ClassificationError.invalid("\(file) line \(line): class \(index) is named twice")
            }
        }
        guard byIndex.keys.sorted() == Array(0..<byIndex.count) else {
            throw ClassificationError.invalid(
                "\(file): names: indices must be 0…\(byIndex.count - 1) (found \(byIndex.keys.sorted().map(String.init).joined(separator: ", ")))"
            )
        }
        return (0..<byIndex.count).map { byIndex[$0]! }
    }
}

/// Numbers as JSONSerialization gives them (NSNumber; a Bool is no number here).
enum JSONNumber {
    static func double(_ value: Any?) -> Double? {
        guard let number = value as? NSNumber, String(cString: number.objCType) != "c", number.doubleValue.isFinite
        else { return nil }
        return number.doubleValue
    }

    static func integer(_ value: Any?) -> Int? {
        guard let double = double(value), double == double.rounded(), abs(double) < 1e15 else { return nil }
        return Int(double)
    }
}
