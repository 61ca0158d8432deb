// ServiceKit
