// Schema
